"""The schema version of the table, and the record that states it.

The version record lives at `keys.version_key()` (PK `_/SYSTEM#`, SK `#VERSION`). Its
attribute names are spelled here for now; they belong in `keys.py` with every other
DynamoDB string and should move there.
"""

from __future__ import annotations

from typing import Any

from zae_limiter import keys

#: The layout of items this release writes. Bumped by a migration, never by a deploy.
SCHEMA_VERSION = 1
#: The oldest client release that understands SCHEMA_VERSION.
MIN_CLIENT_VERSION = "0.1.0"

A_SCHEMA_VERSION = "schema_version"
A_MIN_CLIENT_VERSION = "min_client_version"
A_UPDATED_AT = "updated_at"
A_UPDATED_BY = "updated_by"


def version_item(now_ms: int, updated_by: str) -> dict[str, Any]:
    """The version record as first written by a deploy, in DynamoDB wire format."""
    return {
        **keys.version_key(),
        A_SCHEMA_VERSION: keys.n(SCHEMA_VERSION),
        A_MIN_CLIENT_VERSION: keys.s(MIN_CLIENT_VERSION),
        A_UPDATED_AT: keys.n(now_ms),
        A_UPDATED_BY: keys.s(updated_by),
    }


def decode_version(item: dict[str, Any]) -> tuple[int | None, str | None]:
    """(schema_version, min_client_version) of a version record; None where missing."""
    version = item.get(A_SCHEMA_VERSION)
    return (
        None if version is None else int(version["N"]),
        keys.get_s(item, A_MIN_CLIENT_VERSION),
    )
