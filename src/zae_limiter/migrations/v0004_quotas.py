"""Schema 4: quotas, limits that reset instead of refilling.

A quota is stored as a bucket on a window clock (bucket.py): its bucket item keeps the
same `b_{name}_{fa,cp,ra,rp,tc}` numbers, with `ra` = 2 x capacity and `rp` = 1 ms, and
its limit config keeps `ra` = `rp` = 0 and the window in `qr` (keys/entities.py). A
client before 0.3.0 would read those numbers as a limit that refills a whole capacity
every millisecond: this step only raises the version record's minimum client to 0.3.0
(the runner does that once `up` returns), and quotas may be stored from then on
(flows/records/config.py refuses them below schema 4). No item changes, so `up` is a no-op.

Not reversible: below schema 4 an older client could be let in while quotas are stored.
"""

from __future__ import annotations

from zae_limiter.flows import Flow
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.version import read_version
from zae_limiter.migrations._base import StepOutcome, StepPlan

version = 4
description = "quotas: limits that reset at calendar instants or a session after first use"
reversible = False
min_client_version = "0.3.0"
down = None

ACTION = "change items for quotas (none: it raises the minimum client to 0.3.0)"


def plan(state: RepoState, now_ms: int) -> Flow[StepPlan]:
    """Nothing to convert: the step is the version bump alone."""
    yield from ()
    return StepPlan(version, ACTION, 0)


def up(state: RepoState, now_ms: int) -> Flow[StepOutcome]:
    record = yield from read_version(state)
    if record is not None and record.schema_version >= version:
        return StepOutcome(version, "up", 0, skipped=True)
    return StepOutcome(version, "up", 0)
