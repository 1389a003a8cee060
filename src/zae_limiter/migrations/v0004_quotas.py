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

from zae_limiter.migrations._bump import bump_plan, bump_up

version = 4
description = "quotas: limits that reset at calendar instants or a session after first use"
reversible = False
min_client_version = "0.3.0"
down = None

ACTION = "change items for quotas (none: it raises the minimum client to 0.3.0)"


plan = bump_plan(version, ACTION)
up = bump_up(version)
