"""Schema 6: global limits, one limit shared by the regions of a global table.

A global limit is stored as a refilling limit plus the regions that share it (`rg` in the
limit config, keys/entities.py). A client that predates global limits ignores `rg`: it
reads the stored numbers as a regional limit and enforces the whole of it on a bucket
item, in every region it runs in. With N regions that is N times the limit, and the
bucket item is written from every region at once (last writer wins: tokens taken in one
region are lost in another). Nothing in a config item can make such a client stop; the
version record can: a release that understands only up to schema 5 refuses a table at 6
(flows/records/version.py), and global limits are stored only from schema 6
(flows/records/config.py refuses them below).

A version step, not a minimum client raised by the first `set_limits` that stores one:
the step is the operator's decision, visible to `migrate --check` in CI and audited like
every other step, made once clients are upgraded, as quotas (schema 4) and scheduled
limits (schema 5) were; a raise made as a side effect of storing a limit would lock out
the older clients of every region at the moment someone edits a config. The minimum
client stays 0.3.0: global limits ship in the same release as schemas 4 and 5.

No item changes (share items are created by the first acquire on a global limit), so
`up` is a no-op. Not reversible: below schema 6 an older client could be let in while
global limits are stored.
"""

from __future__ import annotations

from zae_limiter.migrations._bump import bump_plan, bump_up

version = 6
description = "global limits: one limit shared by the regions of a global table"
reversible = False
min_client_version = "0.3.0"
down = None

ACTION = "change items for global limits (none: older clients refuse the table from here)"


plan = bump_plan(version, ACTION)
up = bump_up(version)
