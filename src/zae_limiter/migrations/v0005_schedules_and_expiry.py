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

from zae_limiter.migrations._bump import bump_plan, bump_up

version = 5
description = "scheduled limits; idle bucket items expire (a ttl moved forward by every write)"
reversible = False
min_client_version = "0.3.0"
down = None

ACTION = (
    "change items for scheduled limits and bucket expiry "
    "(none: each bucket's next write sets its ttl)"
)


plan = bump_plan(version, ACTION)
up = bump_up(version)
