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

from zae_limiter.limits import Limit
from zae_limiter.operations import Operations
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.client import Program, Run
from zae_limiter.sim.spec import RESOURCE, YEAR_S

#: Where a change is stored (docs/library.md: entity over resource over system).
LEVELS = ("entity", "resource", "entity-deleted", "system")


def changed(c: Choices, limits: Sequence[Limit]) -> tuple[Limit, ...]:
    """`limits` with one of them (not a quota) given other numbers of its kind: a
    capacity from a third to twice the old one, the rate scaled with it."""
    names = [limit.name for limit in limits if limit.window is None]
    if not names:
        return tuple(limits)
    name = c.pick(names)
    out = []
    for limit in limits:
        if limit.name != name:
            out.append(limit)
            continue
        cap = c.between(max(1, limit.capacity // 3), 2 * limit.capacity)
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
