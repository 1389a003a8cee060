"""Audit events: written in the same transaction as the change they describe, and read.

A change flow reads the state it replaces, then writes the change and its event in one
TransactWriteItems whose condition is that state: a concurrent change makes the
transaction fail (nothing is written) and the flow reads again, so the "before" of an
event is always what the change replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import CONCURRENT_CHANGE, RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, one, paginate
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.limits import Limit
from zae_limiter.models import AuditEvent, Entity

#: Reads and attempts of one change when other writers keep changing the same item.
MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Auditor:
    """Who changes, when, and how long the record is kept; `new_id` names each event."""

    principal: str
    now_ms: int
    retention_days: int | None
    new_id: Callable[[], str]

    def put(
        self,
        state: RepoState,
        action: str,
        *,
        entity_id: str | None = None,
        resource: str | None = None,
        before: dict[str, Any] | None = None,
        after: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """The event as a transaction item."""
        event = AuditEvent(
            event_id=self.new_id(),
            at_ms=self.now_ms,
            principal=self.principal,
            action=action,
            namespace=namespace or state.namespace,
            entity_id=entity_id,
            resource=resource,
            before=before,
            after=after,
        )
        return keys.tx_put(state.table, keys.audit_item(event, self.retention_days))


def write_transaction(state: RepoState, items: Sequence[dict[str, Any]]) -> Flow[bool]:
    """Write the change and its event together; False when a condition failed."""
    result = yield from one(Call("transact_write_items", keys.transact(items)))
    return result.ok


def too_busy(what: str) -> RateLimiterUnavailable:
    return RateLimiterUnavailable(
        f"{what} kept changing while it was being changed ({MAX_ATTEMPTS} attempts); try again",
        code=CONCURRENT_CHANGE,
    )


#: One attempt's transaction (the change, conditional on the item as read, and its event)
#: from the item as read; None when there is nothing to change. A flow when planning
#: needs reads of its own.
Planned = Sequence[dict[str, Any]] | None
ChangePlanner = Callable[[keys.Item | None], Flow[Planned] | Planned]


def audited_change(
    state: RepoState, item_key: keys.Item, what: str, plan: ChangePlanner
) -> Flow[keys.Item | None]:
    """Read the item (consistently), plan the change from it and commit the plan; read and
    plan again when the plan's condition failed (someone else changed the item meanwhile).
    Returns the item the change replaced (None: there was none)."""
    for _attempt in range(MAX_ATTEMPTS):
        read = yield from one(Call("get_item", keys.get_consistent(state.table, item_key)))
        planned = plan(read.item)
        items = (yield from planned) if isinstance(planned, Generator) else planned
        if items is None or (yield from write_transaction(state, items)):
            return read.item
    raise too_busy(what)


def limits_json(limits: Sequence[Limit]) -> dict[str, Any]:
    return {"limits": [_limit_json(x) for x in limits]}


def _limit_json(limit: Limit) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": limit.name,
        "capacity": limit.capacity,
        "refill_amount": limit.refill_amount,
        "refill_period_seconds": limit.refill_period_seconds,
    }
    if limit.window is not None:  # a quota: the audit trail says how it resets
        body["reset"] = limit.window.spec()
    if limit.schedule:  # a scheduled limit: its overrides are part of what changed
        body["schedule"] = [
            {
                "start": o.start,
                "end": o.end,
                "tz": o.tz,
                "capacity": o.capacity,
                "refill_amount": o.refill_amount,
                "refill_period_seconds": o.refill_period_seconds,
            }
            for o in limit.schedule
        ]
    return body


def entity_json(entity: Entity) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": entity.name,
        "parent_id": entity.parent_id,
        "cascade": entity.cascade,
    }
    # Only when set: events of entities without them stay as they were.
    if entity.cascade_for:
        body["cascade_for"] = dict(entity.cascade_for)
    if entity.bypass:
        body["bypass"] = True
    return body


def get_audit_events(
    state: RepoState,
    entity_id: str | None,
    since_ms: int,
    limit: int | None,
    table_level: bool = False,
) -> Flow[list[AuditEvent]]:
    """Events oldest first: of one entity, or of the whole namespace (or table)."""

    if entity_id is not None:
        keys.validate_id("entity_id", entity_id)
        items = yield from paginate(
            Call(
                "query", keys.audit_query_entity(state.table, state.namespace, entity_id, since_ms)
            )
        )
    else:
        ns = keys.TABLE_NAMESPACE if table_level else state.namespace
        found = yield from paginate(
            Call("query", keys.audit_query_namespace(state.table, ns, since_ms))
        )
        wanted = [keys.item_key(i) for i in found]
        fetched = yield from batch_get(state, wanted)
        items = [fetched[k] for k in (keys.key_id(w) for w in wanted) if k in fetched]
    events = sorted((keys.decode_audit(i) for i in items), key=lambda e: (e.at_ms, e.event_id))
    return events if limit is None else events[-limit:]
