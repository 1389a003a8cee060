"""Check that the table exists, or create it from the table definition."""

from __future__ import annotations

from zae_limiter import keys, schema
from zae_limiter import table as table_def
from zae_limiter.errors import TableNotFoundError, ZaeLimiterError
from zae_limiter.flows import Call, Flow, one, pause
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.version import VersionRecord, check_version


def describe(state: RepoState) -> Flow[dict[str, object] | None]:
    try:
        result = yield from one(Call("describe_table", {"TableName": state.table}))
    except TableNotFoundError:
        return None
    return dict(result.response.get("Table") or {})


def ensure_table(
    state: RepoState, create: bool, now_ms: int = 0, wait_seconds: int = 60
) -> Flow[None]:
    """Return when the table is ACTIVE; create it first when asked and it is missing.

    A table created here is stamped with the current schema version, as a deploy does, so
    `zae-limiter migrate --check` passes on it.
    """
    info = yield from describe(state)
    created = False
    if info is None:
        if not create:
            raise TableNotFoundError(state.table)
        yield from one(Call("create_table", table_def.create_table_params(state.table)))
        created = True
    for _ in range(wait_seconds * 4):
        if info is not None and info.get("TableStatus") == "ACTIVE":
            if created:
                record = schema.version_item(now_ms, "Repository.open(create_table=True)")
                yield from one(Call("put_item", keys.put_new(state.table, record)))
            return
        yield from pause(250)
        info = yield from describe(state)
    raise ZaeLimiterError(f"table {state.table!r} did not become ACTIVE in {wait_seconds}s")


def open_table(
    state: RepoState, create: bool, now_ms: int, check_schema: bool
) -> Flow[VersionRecord | None]:
    """What `Repository.open` does: the table is there (or made), and its schema fits."""
    yield from ensure_table(state, create, now_ms)
    if not check_schema:
        return None
    record = yield from check_version(state)
    # Below schema 5 an older client may share the table and would not move a `ttl`.
    state.bucket_expiry = record is None or record.schema_version >= schema.EXPIRY_SCHEMA_VERSION
    return record
