"""Reading usage snapshots (written by the aggregator): list them, or sum them up.

Where they are found:
- by entity: the entity's own partition, SK begins_with `#USAGE#[{resource}#[{window}#]]`;
- by resource: GSI2 (`{ns}/RESOURCE#{resource}`, `USAGE#[{window}#]`), KEYS_ONLY, so the
  keys are queried and the items fetched with BatchGetItem;
- the whole namespace: GSI4 (`{ns}`, `USAGE#`), KEYS_ONLY, then BatchGetItem.

`start` / `end` select snapshots whose window overlaps [start, end]; they may be datetimes
(naive ones are UTC) or ISO strings such as `2026-11-25`, `2026-11-25T14:00Z`, `2026-11`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.records import WINDOWS, window_bounds
from zae_limiter.errors import ValidationError
from zae_limiter.flows import Call, Flow, paginate
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.models import UsageSnapshot, UsageSummary

TimeArg = datetime | str | None
DEFAULT_SUMMARY_WINDOW = "hourly"


def parse_time(value: TimeArg, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        text = value.strip()
        try:
            if len(text) == 7:  # YYYY-MM
                parsed = datetime.strptime(text, "%Y-%m")
            else:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(
                f"{what} {value!r} is not a date or time (e.g. 2026-11-25 or 2026-11-25T14:00Z)"
            ) from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValidationError(f"{what} must be a datetime or an ISO string, got {value!r}")


def _validate(entity_id: str | None, resource: str | None, window: str | None) -> None:
    if entity_id is not None:
        keys.validate_id("entity_id", entity_id)
    if resource is not None:
        keys.validate_id("resource", resource)
    if window is not None and window not in WINDOWS:
        raise ValidationError(f"unknown usage window {window!r}; choose from {sorted(WINDOWS)}")


def _items(
    state: RepoState, entity_id: str | None, resource: str | None, window: str | None
) -> Flow[list[dict[str, Any]]]:
    ns, table = state.namespace, state.table
    if entity_id is not None:
        call = Call("query", keys.usage_query_entity(table, ns, entity_id, resource, window))
        return (yield from paginate(call))
    if resource is not None:
        query = keys.usage_query_resource(table, ns, resource, window)
    else:
        query = keys.usage_query_namespace(table, ns)
    found = yield from paginate(Call("query", query))
    wanted = [keys.item_key(i) for i in found]
    items = yield from batch_get(state, wanted)
    return list(items.values())


def _overlaps(snap: UsageSnapshot, start: datetime | None, end: datetime | None) -> bool:
    if start is None and end is None:
        return True
    try:
        begin, finish = window_bounds(snap.window, snap.window_start)
    except ValueError:
        return False
    return (start is None or finish > start) and (end is None or begin <= end)


def get_usage_snapshots(
    state: RepoState,
    entity_id: str | None = None,
    resource: str | None = None,
    window: str | None = None,
    start: TimeArg = None,
    end: TimeArg = None,
) -> Flow[list[UsageSnapshot]]:
    """Snapshots matching every given filter, sorted by entity, resource, window, start."""
    _validate(entity_id, resource, window)
    begin, finish = parse_time(start, "start"), parse_time(end, "end")
    items = yield from _items(state, entity_id, resource, window)
    snaps = [keys.decode_usage(item) for item in items]
    selected = [
        s
        for s in snaps
        if (resource is None or s.resource == resource)
        and (window is None or s.window == window)
        and _overlaps(s, begin, finish)
    ]
    return sorted(selected, key=lambda s: (s.entity_id, s.resource, s.window, s.window_start))


def summarize(
    snapshots: Sequence[UsageSnapshot],
    window: str,
    entity_id: str | None = None,
    resource: str | None = None,
    start: str | None = None,
    end: str | None = None,
) -> UsageSummary:
    counters: dict[str, int] = {}
    events = 0
    for snap in snapshots:
        events += snap.total_events
        for name, value in snap.counters.items():
            counters[name] = counters.get(name, 0) + value
    return UsageSummary(
        window,
        entity_id,
        resource,
        start,
        end,
        len(snapshots),
        events,
        dict(sorted(counters.items())),
    )


def get_usage_summary(
    state: RepoState,
    entity_id: str | None = None,
    resource: str | None = None,
    window: str = DEFAULT_SUMMARY_WINDOW,
    start: TimeArg = None,
    end: TimeArg = None,
) -> Flow[UsageSummary]:
    """Totals per limit over one window kind (summing several kinds would count twice)."""
    snaps = yield from get_usage_snapshots(state, entity_id, resource, window, start, end)
    return summarize(
        snaps, window, entity_id, resource,
        None if start is None else str(start), None if end is None else str(end),
    )  # fmt: skip
