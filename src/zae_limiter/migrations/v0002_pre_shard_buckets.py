"""Schema 2: pre-shard buckets (a clean break).

Schema 1 kept an entity's buckets in the entity's partition (PK `{ns}/ENTITY#{id}`, SK
`#BUCKET#{resource}`). Schema 2 gives each bucket shard its own partition
(`{ns}/BUCKET#{id}#{resource}#{shard}`, SK `#STATE`), created on first use from the stored
limits. Buckets refill from those limits, so nothing is copied: the old bucket items, in
every namespace, are left alone with a TTL of one day and are never read again. Entities,
limit configs and usage snapshots are not touched.

Not reversible: a schema-1 client would find its buckets expiring.
"""

from __future__ import annotations

from typing import Any, cast

from zae_limiter import keys
from zae_limiter import table as table_def
from zae_limiter.errors import SchemaVersionError
from zae_limiter.flows import Call, Flow, one, together
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.table import describe
from zae_limiter.flows.records.version import begin_migration, read_version, save_progress
from zae_limiter.migrations._base import StepOutcome, StepPlan

version = 2
description = "pre-shard buckets: old bucket items expire, new ones are created on first use"
reversible = False
min_client_version = "0.1.0"
down = None

PHASE = "expire-old-buckets"
ACTION = "set a 1-day TTL on old-layout bucket items"
TTL_SECONDS = 24 * 60 * 60
PAGE_SIZE = 200
CONCURRENCY = 10


def expire_at_s(now_ms: int) -> int:
    return now_ms // 1000 + TTL_SECONDS


def missing_indexes(state: RepoState) -> Flow[str | None]:
    """Schema 2 reads buckets through GSI3 and GSI4; the stack must have them first."""
    info = yield from describe(state)
    indexes = cast(list[dict[str, Any]], (info or {}).get("GlobalSecondaryIndexes") or [])
    present = {str(i.get("IndexName")) for i in indexes}
    missing = [i.name for i in table_def.INDEXES if i.name not in present]
    if not missing:
        return None
    return (
        f"table {state.table!r} lacks index {', '.join(missing)} that schema {version} needs; "
        f"update the stack first: `zae-limiter deploy --name {state.table}`"
    )


def plan(state: RepoState, now_ms: int) -> Flow[StepPlan]:
    """Count the old bucket items `up` would give a TTL, per namespace. Reads only keys."""
    blocked = yield from missing_indexes(state)
    ttl = expire_at_s(now_ms)
    by_namespace: dict[str, int] = {}
    cursor: dict[str, Any] | None = None
    while True:
        page = yield from one(Call("scan", keys.old_bucket_scan(state.table, ttl, cursor, 1000)))
        for item in page.items:
            ns = keys.namespace_of(item[keys.PK]["S"])
            by_namespace[ns] = by_namespace.get(ns, 0) + 1
        cursor = page.response.get("LastEvaluatedKey")
        if not cursor:
            break
    return StepPlan(version, ACTION, sum(by_namespace.values()), by_namespace, blocked)


def up(state: RepoState, now_ms: int, page_size: int | None = None) -> Flow[StepOutcome]:
    """Give every old bucket item a TTL, a page at a time, saving the cursor after each."""
    blocked = yield from missing_indexes(state)
    if blocked:
        raise SchemaVersionError(blocked)
    record = yield from read_version(state)
    if record is not None and record.schema_version >= version:
        return StepOutcome(version, "up", 0, skipped=True)
    record = yield from begin_migration(state, version, now_ms)
    if record is None:  # another run finished it meanwhile
        return StepOutcome(version, "up", 0, skipped=True)
    resuming = record.migration_step == PHASE
    cursor = record.cursor if resuming else None
    done = record.done if resuming else 0
    if resuming and cursor is None:  # the phase had finished; only the bump was missing
        return StepOutcome(version, "up", 0)
    ttl = expire_at_s(now_ms)
    changed = 0
    while True:
        page = yield from one(
            Call("scan", keys.old_bucket_scan(state.table, ttl, cursor, page_size or PAGE_SIZE))
        )
        changed += yield from _expire(state, page.items, ttl)
        cursor = page.response.get("LastEvaluatedKey") or None
        yield from save_progress(state, version, PHASE, cursor, done + changed)
        if cursor is None:
            return StepOutcome(version, "up", changed)


def _expire(state: RepoState, items: list[dict[str, Any]], ttl: int) -> Flow[int]:
    changed = 0
    for start in range(0, len(items), CONCURRENCY):
        calls = [
            Call(
                "update_item",
                keys.expire_old_bucket(
                    state.table, {keys.PK: i[keys.PK], keys.SK: i[keys.SK]}, ttl
                ),
            )
            for i in items[start : start + CONCURRENCY]
        ]
        results = yield from together(*calls)
        changed += sum(1 for r in results if r.ok)
    return changed
