"""The table's schema version record against this client (`flows.records.version`, `schema`)."""

from __future__ import annotations

from zae_limiter import schema
from zae_limiter.doctor.context import AwsCallError, Context
from zae_limiter.doctor.report import Check, fail, ok, warn
from zae_limiter.flows.records.version import (
    VersionRecord,
    client_version,
    decode_version,
    version_at_least,
)

NAME = "schema"


def judge(
    name: str, record: VersionRecord | None, client: str, supported: int = schema.SCHEMA_VERSION
) -> Check:
    """Pure: what the record means for this client, and the fix when it does not fit."""
    migrate = f"run `zae-limiter migrate --name {name}`"
    upgrade = "upgrade zae-limiter (pip install -U zae-limiter)"
    facts = {"client_version": client, "client_schema": supported}
    if record is None:
        return warn(
            NAME,
            "no schema version record: the table is taken as current, but nothing stops an "
            "older client from writing to it",
            f"{migrate} to stamp it",
            **facts,
            schema_version=None,
        )
    facts |= {
        "schema_version": record.schema_version,
        "min_client_version": record.min_client_version,
        "migrating_to": record.migrating_to,
    }
    stated = f"table at schema {record.schema_version}, this client ({client}) at {supported}"
    if record.schema_version > supported or (record.migrating_to or 0) > supported:
        return fail(NAME, f"{stated}: the table is newer than this client", upgrade, **facts)
    if record.min_client_version and not version_at_least(client, record.min_client_version):
        return fail(
            NAME,
            f"{stated}: the table accepts clients from {record.min_client_version} on",
            f"{upgrade} to {record.min_client_version} or later",
            **facts,
        )
    oldest = min(supported, schema.OLDEST_READABLE)
    if record.schema_version < oldest:
        return fail(
            NAME, f"{stated}: too old for this client to read (it reads {oldest} on)",
            migrate, **facts,
        )  # fmt: skip
    if record.migrating:
        return warn(
            NAME,
            f"{stated}: a migration to {record.migrating_to} is under way or was interrupted",
            f"{migrate} to resume it (check first that no other migrate is running)",
            **facts,
        )
    if record.schema_version < supported:
        return warn(
            NAME,
            f"{stated}: readable, but items are converted on their first write",
            migrate,
            **facts,
        )
    return ok(NAME, stated, **facts)


def check(ctx: Context) -> Check:
    try:
        item = ctx.read_version_item()
    except AwsCallError as error:
        return fail(
            NAME,
            f"the version record could not be read: {error}",
            f"grant dynamodb:GetItem on table {ctx.name}",
        )
    return judge(ctx.name, None if item is None else decode_version(item), client_version())
