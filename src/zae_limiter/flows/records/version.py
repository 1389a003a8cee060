"""The table's schema version record: read it, check a client against it, write it.

The record (`keys.version_key()`, PK `_/SYSTEM#`, SK `#VERSION`) states the schema
version of the whole table, the oldest client release that understands it, when and by
whom it last changed, and, while a migration step runs, where that step stands
(`migrating_to`, `migration_step`, `migration_cursor`) so an interrupted run resumes.

A table without a record is taken as fresh (current): `zae-limiter migrate --check`
reports it, and `zae-limiter migrate` stamps it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from zae_limiter import keys, schema
from zae_limiter.errors import SchemaVersionError
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState

PACKAGE = "zae-limiter"


@dataclass(frozen=True, slots=True)
class VersionRecord:
    schema_version: int
    min_client_version: str | None = None
    updated_at_ms: int | None = None
    updated_by: str | None = None
    migrating_to: int | None = None
    migration_step: str | None = None
    cursor: dict[str, Any] | None = None
    done: int = 0

    @property
    def migrating(self) -> bool:
        return self.migrating_to is not None


def decode_version(item: dict[str, Any]) -> VersionRecord:
    migrating = item.get(keys.A_MIGRATING_TO)
    updated = item.get(keys.A_UPDATED_AT)
    cursor = keys.get_s(item, keys.A_MIGRATION_CURSOR)
    return VersionRecord(
        schema_version=keys.get_n(item, keys.A_SCHEMA_VERSION, 0),
        min_client_version=keys.get_s(item, keys.A_MIN_CLIENT_VERSION),
        updated_at_ms=None if updated is None else int(updated["N"]),
        updated_by=keys.get_s(item, keys.A_UPDATED_BY),
        migrating_to=None if migrating is None else int(migrating["N"]),
        migration_step=keys.get_s(item, keys.A_MIGRATION_STEP),
        cursor=json.loads(cursor) if cursor else None,
        done=keys.get_n(item, keys.A_MIGRATION_DONE),
    )


def client_version() -> str:
    """This client's release, as installed (`importlib.metadata`)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


def parse_version(text: str) -> tuple[int, ...]:
    """'0.10.2' -> (0, 10, 2); pre-release tails ('1.2.0rc1', '1.2.0.dev3') are dropped."""
    parts: list[int] = []
    for piece in text.strip().lstrip("vV").split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.end() != len(piece):
            break
    if not parts:
        raise ValueError(f"not a version: {text!r}")
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def version_at_least(have: str, need: str) -> bool:
    return parse_version(have) >= parse_version(need)


def check_record(
    record: VersionRecord | None,
    table: str,
    client: str,
    supported: int = schema.SCHEMA_VERSION,
) -> None:
    """Refuse a table this client cannot use; pure, so each rule is testable alone."""
    if record is None:
        return
    fix = f"`zae-limiter migrate --name {table}`"
    if record.schema_version > supported:
        raise SchemaVersionError(
            f"table {table!r} has schema version {record.schema_version}, but zae-limiter "
            f"{client} understands only up to {supported}: upgrade zae-limiter "
            f"(see `zae-limiter migrate --name {table} --check`)"
        )
    # A table at any schema from `oldest` up, or migrating within that range, is read:
    # this release reads both item forms those schemas leave.
    oldest = min(supported, schema.OLDEST_READABLE)
    beyond = record.migrating_to is not None and record.migrating_to > supported
    if record.schema_version < oldest or beyond:
        doing = (
            f" (a migration to {record.migrating_to} is under way or was interrupted)"
            if record.migrating
            else ""
        )
        raise SchemaVersionError(
            f"table {table!r} has schema version {record.schema_version}{doing}, but "
            f"zae-limiter {client} needs schema version {oldest} or later: run {fix}"
        )
    if record.min_client_version and not version_at_least(client, record.min_client_version):
        raise SchemaVersionError(
            f"zae-limiter {client} is older than {record.min_client_version}, the oldest "
            f"release table {table!r} (schema version {record.schema_version}) accepts: "
            f"upgrade zae-limiter to {record.min_client_version} or later"
        )


def read_version(state: RepoState) -> Flow[VersionRecord | None]:
    result = yield from one(Call("get_item", keys.get_version(state.table)))
    return decode_version(result.item) if result.item else None


def check_version(state: RepoState, client: str | None = None) -> Flow[VersionRecord | None]:
    """Read the record and raise `SchemaVersionError` when this client must not use it."""
    record = yield from read_version(state)
    check_record(record, state.table, client or client_version())
    return record


def write_version(
    state: RepoState,
    version: int,
    min_client_version: str,
    now_ms: int,
    updated_by: str,
    replaces: int | None = None,
) -> Flow[VersionRecord | None]:
    """State the schema version (and clear migration progress); with `replaces`, only
    over that version: None when the table was not at it (another run moved it on)."""
    request = keys.set_version(
        state.table, version, min_client_version, now_ms, updated_by, replaces
    )
    result = yield from one(Call("update_item", request))
    if not result.ok:
        return None
    return decode_version(result.attributes)


def begin_migration(state: RepoState, to_version: int, now_ms: int) -> Flow[VersionRecord | None]:
    """Mark the step to `to_version` under way; None when the table is already there."""
    result = yield from one(
        Call("update_item", keys.begin_migration(state.table, to_version - 1, to_version, now_ms))
    )
    if not result.ok:
        return None
    return decode_version(result.attributes)


def save_progress(
    state: RepoState, to_version: int, step: str, cursor: dict[str, Any] | None, done: int
) -> Flow[None]:
    """Record where the step stands; refuses if another run changed the record meanwhile."""
    text = None if cursor is None else json.dumps(cursor, sort_keys=True)
    result = yield from one(
        Call("update_item", keys.save_migration_progress(state.table, to_version, step, text, done))
    )
    if not result.ok:
        raise SchemaVersionError(
            f"the version record of table {state.table!r} changed during the migration to "
            f"{to_version} (another `zae-limiter migrate` running?); run it again to resume"
        )
