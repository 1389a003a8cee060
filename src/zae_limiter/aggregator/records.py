"""Stream records -> bucket changes. Pure: no I/O, no clock.

A record is one DynamoDB stream record as Lambda delivers it (`eventName`, `dynamodb`
with `Keys`, `NewImage`, `OldImage`, `SequenceNumber`, `ApproximateCreationDateTime`) or
as `GetRecords` returns it (the time is then a datetime). Only bucket items (`#STATE`)
matter; everything else in the table (entities, configs, our own usage snapshots) is
skipped. Consumption is the difference of each user limit's `tc` between the new and the
old image: a REMOVE contributes nothing, and moto's keys-only INSERT before the real one
contributes 0, so events are never counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from zae_limiter import keys
from zae_limiter.keys import regions as rk
from zae_limiter.limits import RESERVED_LIMIT_NAMES

Record = Mapping[str, Any]
_EVENTS = frozenset({keys.STREAM_INSERT, keys.STREAM_MODIFY, keys.STREAM_REMOVE})
_PREFIX_LEN = len(keys.BUCKET_PREFIX)
_SUFFIX_LEN = len(keys.TC_SUFFIX)
TC, BP = keys.TC_SUFFIX, keys.BUCKET_PREFIX
_HIDDEN = frozenset({"", *RESERVED_LIMIT_NAMES})


class MalformedRecord(ValueError):
    """A bucket record that cannot be understood; it is reported as failed, never dropped."""


@dataclass(slots=True)
class Change:
    """One write to one bucket shard, as the stream saw it."""

    seq: int
    sequence_number: str
    ns: str
    entity_id: str
    resource: str
    shard_id: int
    time_ms: int | None
    deltas: Mapping[str, int]
    new: Mapping[str, Any] | None
    old: Mapping[str, Any] | None
    #: An acquire (or an upward adjustment): some user limit's consumption grew.
    consumed: bool = False
    #: A write to this region's share item of a global limit (None: a bucket shard);
    #: `shard_id` is then the item's usage fence (keys.regions.share_fence_id).
    region: str | None = None

    @property
    def group(self) -> tuple[str, str, str]:
        return self.ns, self.entity_id, self.resource


def sequence_number(record: Record) -> str | None:
    body = record.get("dynamodb")
    if not isinstance(body, Mapping):
        return None
    seq = body.get("SequenceNumber")
    return seq if isinstance(seq, str) and seq.isdigit() else None


def parse(record: Record) -> Change | None:
    """The bucket change a record carries; None for items that are not buckets.

    Raises MalformedRecord for a record that claims to be a bucket write but is broken.
    """
    body = record.get("dynamodb")
    if not isinstance(body, Mapping):
        raise MalformedRecord("record has no 'dynamodb' section")
    pk, sk = _key(body)
    if sk != keys.SK_STATE or not keys.is_bucket_pk(pk):
        return _share_change(record, body, pk, sk) if rk.is_share_key(pk, sk) else None
    try:
        ns, entity_id, resource, shard_id = keys.parse_bucket_pk(pk)
    except ValueError as error:
        raise MalformedRecord(str(error)) from error
    seq = sequence_number(record)
    if seq is None:
        raise MalformedRecord(f"bucket record {pk!r} has no numeric SequenceNumber")
    event = record.get("eventName")
    if event not in _EVENTS:
        raise MalformedRecord(f"bucket record {pk!r} has unknown eventName {event!r}")
    new = body.get("NewImage") if event != keys.STREAM_REMOVE else None
    old = body.get("OldImage")
    try:
        deltas = tc_deltas(new, old) if new is not None else {}
        time_ms = record_time_ms(body.get("ApproximateCreationDateTime"))
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedRecord(f"bucket record {pk!r}: {error!r}") from error
    consumed = any(v > 0 for v in deltas.values())
    return Change(
        int(seq), seq, ns, entity_id, resource, shard_id, time_ms, deltas, new, old, consumed
    )


def _share_change(record: Record, body: Mapping[str, Any], pk: str, sk: str) -> Change:
    """A write to a region's share item of a global limit (docs/global.md): what it
    consumed (`tc` new - old) counts as the entity's use of that limit, fenced under the
    item's own id. Every region's stream carries every region's share items (replicated
    ones too), so each region's snapshots add up the whole limit's use."""
    try:
        ns, entity_id, resource, limit_name = rk.parse_share_pk(pk)
    except ValueError as error:
        raise MalformedRecord(str(error)) from error
    seq = sequence_number(record)
    event = record.get("eventName")
    if seq is None or event not in _EVENTS:
        raise MalformedRecord(f"share record {pk!r} has no numeric SequenceNumber or eventName")
    new = body.get("NewImage") if event != keys.STREAM_REMOVE else None
    old = body.get("OldImage") or {}
    consumed_attr = rk.ShareAttr.CONSUMED
    try:
        delta = keys.get_n(new, consumed_attr) - keys.get_n(old, consumed_attr) if new else 0
        time_ms = record_time_ms(body.get("ApproximateCreationDateTime"))
    except (KeyError, TypeError, ValueError) as error:
        raise MalformedRecord(f"share record {pk!r}: {error!r}") from error
    region = sk[len(rk.ShareAttr.REGION_SK_PREFIX) :]
    fence = rk.share_fence_id(limit_name, region)
    deltas = {limit_name: delta} if delta else {}
    return Change(
        int(seq), seq, ns, entity_id, resource, fence, time_ms, deltas, new,
        body.get("OldImage"), delta > 0, region,
    )  # fmt: skip


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    item = body.get("Keys") or body.get("NewImage") or body.get("OldImage")
    try:
        return keys.key_id(item)  # type: ignore[arg-type]
    except (KeyError, TypeError) as error:
        raise MalformedRecord("record has no PK/SK keys") from error


def tc_deltas(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> dict[str, int]:
    """Millitokens each user limit consumed in this write (`tc` new - old; non-zero only)."""
    out: dict[str, int] = {}
    old = old or {}
    for attr, value in new.items():
        if attr[-3:] != TC or attr[:2] != BP or attr[_PREFIX_LEN:-_SUFFIX_LEN] in _HIDDEN:
            continue
        before = old.get(attr)
        if before is value or before == value:
            continue
        delta = int(value["N"]) - (int(before["N"]) if before is not None else 0)
        if delta:
            out[attr[_PREFIX_LEN:-_SUFFIX_LEN]] = delta
    return out


def record_time_ms(value: object) -> int | None:
    """ApproximateCreationDateTime: epoch seconds (Lambda) or a datetime (GetRecords)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1000)
    if isinstance(value, str):
        return int(float(value) * 1000)
    raise TypeError(f"ApproximateCreationDateTime {value!r}")


# ---------------------------------------------------------------- usage windows
WINDOWS: dict[str, int] = {"hourly": 3600, "daily": 86400, "monthly": 0}


def validate_windows(windows: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [w for w in windows if w not in WINDOWS]
    if unknown or not windows:
        raise ValueError(f"unknown usage windows {unknown}; choose from {sorted(WINDOWS)}")
    return windows


@lru_cache(maxsize=4096)
def window_starts(hour: int) -> dict[str, tuple[str, int]]:
    """{window: (window_start, window_end_s)} of the hour `hour` (epoch hours)."""
    t = datetime.fromtimestamp(hour * 3600, tz=UTC)
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    month_end = datetime(year, month, 1, tzinfo=UTC)
    day_start = (hour * 3600) // 86400 * 86400
    return {
        "hourly": (t.strftime("%Y-%m-%dT%H:00Z"), hour * 3600 + 3600),
        "daily": (t.strftime("%Y-%m-%d"), day_start + 86400),
        "monthly": (t.strftime("%Y-%m"), int(month_end.timestamp())),
    }


def window_bounds(window: str, window_start: str) -> tuple[datetime, datetime]:
    """[begin, end) of a snapshot's window, from its stored start."""
    if window == "hourly":
        begin = datetime.strptime(window_start, "%Y-%m-%dT%H:00Z").replace(tzinfo=UTC)
        return begin, datetime.fromtimestamp(begin.timestamp() + 3600, tz=UTC)
    if window == "daily":
        begin = datetime.strptime(window_start, "%Y-%m-%d").replace(tzinfo=UTC)
        return begin, datetime.fromtimestamp(begin.timestamp() + 86400, tz=UTC)
    if window == "monthly":
        begin = datetime.strptime(window_start, "%Y-%m").replace(tzinfo=UTC)
        year, month = (begin.year + 1, 1) if begin.month == 12 else (begin.year, begin.month + 1)
        return begin, datetime(year, month, 1, tzinfo=UTC)
    raise ValueError(f"unknown usage window {window!r}")
