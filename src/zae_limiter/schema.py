"""The schema version of the table, and the record that states it.

The version record lives at `keys.version_key()` (PK `_/SYSTEM#`, SK `#VERSION`); its
attribute names are in `keys/version.py`, and `flows.records.version` reads and migrates it.
"""

from __future__ import annotations

from typing import Any

from zae_limiter import keys

#: The layout of items this release writes. Bumped by a migration, never by a deploy.
SCHEMA_VERSION = 6
#: The first schema whose tables may store quotas (limits that reset): from there, the
#: version record's minimum client keeps out releases that would read one as a refilling
#: limit (migrations/v0004_quotas.py).
QUOTA_SCHEMA_VERSION = 4
#: The first schema whose tables may store scheduled limits, and whose bucket items carry
#: a `ttl` every client moves forward (migrations/v0005_schedules_and_expiry.py).
SCHEDULE_SCHEMA_VERSION = 5
EXPIRY_SCHEMA_VERSION = 5
#: The first schema whose tables may store global limits: a release that understands
#: only up to 5 ignores a limit's regions and would enforce the whole limit in each
#: region, so it must refuse the table (migrations/v0006_global_limits.py).
GLOBAL_SCHEMA_VERSION = 6
#: The oldest schema this release still reads: schema-2 bucket items (`tk` as of `rf`)
#: are read as they are and converted on their first write, or by `zae-limiter migrate`.
OLDEST_READABLE = 2
#: The oldest client release that understands SCHEMA_VERSION.
MIN_CLIENT_VERSION = "0.3.0"


def version_item(now_ms: int, updated_by: str) -> dict[str, Any]:
    """The version record as first written by a deploy, in DynamoDB wire format."""
    return {
        **keys.version_key(),
        keys.A_SCHEMA_VERSION: keys.n(SCHEMA_VERSION),
        keys.A_MIN_CLIENT_VERSION: keys.s(MIN_CLIENT_VERSION),
        keys.A_UPDATED_AT: keys.n(now_ms),
        keys.A_UPDATED_BY: keys.s(updated_by),
    }
