"""What an operator changes beside the clients, besides deleting entities
(sim/background.py): the stored limits, and the schema (a migration step).

Both run as threads of the operator's process, so their requests meet the faults every
request may meet. The checker is not told what the operator meant: it follows what the
table's bucket items store (`sim.delivery.Delivery._configs`), which is what clients
with cached config and new config alike write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from zae_limiter import keys, migrations
from zae_limiter.bucket import LimitState
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.version import read_version
from zae_limiter.keys import Item
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState
from zae_limiter.operations import Operations
from zae_limiter.repository import _state
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.client import Program, Run
from zae_limiter.sim.spec import RESOURCE, YEAR_S

#: Where a change is stored (docs/library.md: entity over resource over system).
LEVELS = ("entity", "resource", "entity-deleted", "system")


def changed(c: Choices, limits: Sequence[Limit]) -> tuple[Limit, ...]:
    """`limits` with one of them (not a quota) given other numbers of its kind: a
    capacity from a third (at least what an acquire takes) to twice the old one, the
    rate scaled with it."""
    names = [limit.name for limit in limits if limit.window is None]
    if not names:
        return tuple(limits)
    name = c.pick(names)
    out = []
    for limit in limits:
        if limit.name != name:
            out.append(limit)
            continue
        # Never below what one acquire takes of it (at most 8, and at most the world's
        # capacity): an acquire that can never be granted is refused as bad input.
        cap = c.between(max(min(8, limit.capacity), limit.capacity // 3), 2 * limit.capacity)
        if limit.refill_period_seconds == YEAR_S:
            out.append(Limit.custom(name, cap, 1, YEAR_S))
        else:
            refill = max(1, limit.refill_amount * cap // limit.capacity)
            out.append(Limit.custom(name, cap, refill, limit.refill_period_seconds))
    return tuple(out)


def change_program(
    ops: Operations, level: str, entity: str, limits: Sequence[Limit], note: Callable[[str], None]
) -> Program:
    """`zae-limiter limits set` (or `delete`) at one level, refused or failed as it may be."""
    flow: Any
    if level == "entity":
        flow, what = ops.set_limits(entity, limits, RESOURCE), f"{entity}'s limits set"
    elif level == "resource":
        flow, what = ops.set_resource_defaults(RESOURCE, limits), "resource defaults set"
    elif level == "system":
        flow, what = ops.set_system_defaults(limits), "system defaults set"
    else:
        flow, what = ops.delete_limits(entity, RESOURCE), f"{entity}'s own limits deleted"
    try:
        yield Run(flow, cleanup=True, what="limits")
    except Exception as error:
        note(f"operator: {what} FAILED ({type(error).__name__})")
        return
    note(f"operator: {what}: {_numbers(limits) if 'deleted' not in what else ''}")


def _numbers(limits: Sequence[Limit]) -> str:
    return ", ".join(
        f"{x.name} {x.capacity}/{x.refill_amount} per {x.refill_period_seconds}s" for x in limits
    )


# ---------------------------------------------------------------- a migration step


def legacy_bucket(namespace: str, entity: str, limits: Sequence[Limit], rf_ms: int) -> Item:
    """A schema-2 bucket item (shard 0 of one): per limit, half its capacity as of
    `rf_ms` (`tk`), as a client before schema 3 left it. Clients convert it on their
    first write, the migration's v0003 step converts it if none did."""
    states = {
        limit.name: LimitState(
            capacity_milli=limit.capacity_milli,
            refill_amount_milli=limit.refill_amount_milli,
            refill_period_ms=limit.refill_period_ms,
        )
        for limit in limits
    }
    item = keys.new_bucket_item(
        namespace, BucketState(entity, RESOURCE, 0, 1, rf_ms, states), rf_ms
    )
    item[keys.A_REFILL] = keys.n(rf_ms)
    for limit in limits:
        item[keys.limit_attr(limit.name, "tk")] = keys.n(limit.capacity_milli - spent(limit))
    return item


def spent(limit: Limit) -> int:
    """Millitokens a legacy item has spent of a limit (the ideal bucket is charged them)."""
    return limit.capacity_milli // 2


def put(table: str, item: Item) -> Flow[None]:
    yield Call("put_item", {"TableName": table, "Item": item})


def migrate_program(
    state: RepoState, now: Callable[[], int], rerun: int, done: Callable[[bool, int], None]
) -> Program:
    """`zae-limiter migrate` beside the clients: the steps the table's version needs, or
    (the table at the latest version) the last `rerun` steps run again, which must change
    nothing. `done(rerun, items)` is told what a run that finished changed."""
    try:
        plan = yield Run(migrations.status(state), cleanup=True, what="migrate")
        if plan.pending:
            run = migrations.migrate(state, plan, now(), "sim")
            outcomes = yield Run(run, cleanup=True, what="migrate")
        else:
            # The steps' own `up` again (what an interrupted run resumes with): the
            # runner would write each step's version back over the latest one.
            outcomes = []
            for step in migrations.STEPS[-rerun:]:
                flow = step.up(state, now())
                outcomes.append((yield Run(flow, cleanup=True, what=f"migrate {step.name}")))
    except Exception:  # refused or failed: `zae-limiter migrate` resumes it next time
        return
    done(not plan.pending, sum(o.items for o in outcomes))


def left_behind(table: str, namespace: str) -> Flow[list[str]]:
    """Keys of schema-2 bucket items still in the table, and the schema version if it is
    not the latest: after a migration finished, there must be none. Requests that land
    late count too: a step's version write is conditioned on the version it replaces, so
    one held in flight past a later run's end fails instead of putting the version back
    (seed 131, docs/simulator.md)."""
    out: list[str] = []
    cursor: Item | None = None
    while True:
        page = yield from one(Call("scan", keys.legacy_bucket_scan(table, cursor, 100)))
        out.extend(str(item[keys.PK]["S"]) for item in page.items)
        cursor = page.response.get("LastEvaluatedKey") or None
        if cursor is None:
            break
    state = _state(table, namespace, 0, 1000, 256, False)
    record = yield from read_version(state)
    at = migrations.current_version(record)
    if at != migrations.LATEST:
        out.append(f"schema version {at}, not {migrations.LATEST}")
    return out
