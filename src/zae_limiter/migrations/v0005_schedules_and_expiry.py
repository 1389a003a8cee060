"""Schema 5: scheduled limits, and bucket items that expire when idle.

Two things a client before schema 5 would get wrong on a table that has them:
- a scheduled limit's config keeps its overrides in `sd` (keys/entities.py); an older
  client ignores them and enforces the base numbers at all hours, and the bucket then
  flips between its numbers and a newer client's at every write (each rebases it);
- a bucket item's `ttl` (keys/expiry.py) moves forward with every write of a client that
  knows it. An older client writes without moving it: a bucket it alone keeps busy
  would expire with tokens spent in it, which is a reset nobody asked for.

So the step is a version bump, as schema 4's: an older release refuses a table whose
schema is beyond what it understands (flows/records/version.py), clients write `ttl` only on a
table at schema 5 or later, and scheduled limits are stored only there. No item changes:
a bucket item gets its `ttl` at its next write (items not written since keep none, as
before), so `up` is a no-op.

Not reversible: below schema 5 an older client could be let in while items expire.
"""

from __future__ import annotations

from zae_limiter.flows import Flow
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.version import read_version
from zae_limiter.migrations._base import StepOutcome, StepPlan

version = 5
description = "scheduled limits; idle bucket items expire (a ttl moved forward by every write)"
reversible = False
min_client_version = "0.3.0"
down = None

ACTION = (
    "change items for scheduled limits and bucket expiry "
    "(none: each bucket's next write sets its ttl)"
)


def plan(state: RepoState, now_ms: int) -> Flow[StepPlan]:
    """Nothing to convert: the step is the version bump alone."""
    yield from ()
    return StepPlan(version, ACTION, 0)


def up(state: RepoState, now_ms: int) -> Flow[StepOutcome]:
    record = yield from read_version(state)
    if record is not None and record.schema_version >= version:
        return StepOutcome(version, "up", 0, skipped=True)
    return StepOutcome(version, "up", 0)
