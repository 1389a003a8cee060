"""Schema 3: buckets store when they will be full.

A schema-2 bucket item keeps, per limit, the tokens `b_{name}_tk` as of the item's refill
time `rf`. Schema 3 keeps one full-at value `b_{name}_fa` (full-at ms x `ra`) instead.
Clients from 0.2.0 read both forms and convert an item on its first write; this step
converts the rest, each item with one conditional write that holds only while its `tk`
and `rf` are what was read (a client's write in between wins, and the item is read
again). The full-at value is what the library's own conversion computes: the tokens
refilled up to now at the shard's share of the rate, clamped to its room
(`bucket.legacy_tokens`), placed by `LimitState.with_tokens`.

Not reversible: a client before 0.2.0 would read a converted limit as full.
"""

from __future__ import annotations

from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import legacy_tokens
from zae_limiter.errors import SchemaVersionError
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.version import begin_migration, read_version, save_progress
from zae_limiter.migrations._base import StepOutcome, StepPlan
from zae_limiter.models import BucketState

version = 3
description = "full-at buckets: each limit's tokens and refill time become when it is full"
reversible = False
min_client_version = "0.2.0"
down = None

PHASE = "convert-buckets"
ACTION = "convert schema-2 bucket items (tokens as of a refill time) to full-at times"
PAGE_SIZE = 100
#: Tries per item when clients keep writing it between our read and our write.
RETRIES = 5


def conversion(table: str, item: dict[str, Any], now_ms: int) -> dict[str, Any] | None:
    """The one conditional write that converts a schema-2 item at `now_ms` (None: the
    item holds no unconverted limit)."""
    bucket = keys.decode_bucket(item)
    if not bucket.legacy_tokens:
        return None
    writes = [_limit(bucket, name, tk, now_ms) for name, tk in bucket.legacy_tokens.items()]
    return keys.take_write(
        table,
        {keys.PK: item[keys.PK], keys.SK: item[keys.SK]},
        writes,
        shard_count=bucket.shard_count,
        now_ms=now_ms,
        legacy_rf=bucket.last_refill_ms,
    )


def _limit(bucket: BucketState, name: str, tk: int, now_ms: int) -> keys.LimitWrite:
    stored = bucket.limits[name]
    count = bucket.shard_count
    reserved = bucket.reserved.get(name, {})
    # Held and lost reserves are out of the room, as the library counts them.
    held = keys.held_milli(reserved, now_ms) + keys.lost_milli(reserved, now_ms)
    tokens = legacy_tokens(stored, tk, bucket.last_refill_ms, now_ms, count, held)
    config = (stored.capacity_milli, stored.refill_amount_milli, stored.refill_period_ms)
    return keys.LimitWrite(
        name,
        keys.REBASE,
        now_ms * stored.refill_amount_milli,
        amount=stored.with_tokens(tokens, now_ms, count, held),
        held=tuple(sorted(reserved.items())),
        config=config,
        old_full_at=None,
        old_config=config,
        old_tokens=tk,
    )


def plan(state: RepoState, now_ms: int) -> Flow[StepPlan]:
    """Count the schema-2 bucket items `up` would convert, per namespace. Writes nothing."""
    by_namespace: dict[str, int] = {}
    cursor: dict[str, Any] | None = None
    while True:
        page = yield from one(Call("scan", keys.legacy_bucket_scan(state.table, cursor, 1000)))
        for item in page.items:
            if keys.decode_bucket(item).legacy_tokens:
                ns = keys.namespace_of(item[keys.PK]["S"])
                by_namespace[ns] = by_namespace.get(ns, 0) + 1
        cursor = page.response.get("LastEvaluatedKey")
        if not cursor:
            break
    return StepPlan(version, ACTION, sum(by_namespace.values()), by_namespace)


def up(state: RepoState, now_ms: int, page_size: int | None = None) -> Flow[StepOutcome]:
    """Convert every schema-2 bucket item, a page at a time, saving the cursor after each."""
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
    changed = 0
    while True:
        page = yield from one(
            Call("scan", keys.legacy_bucket_scan(state.table, cursor, page_size or PAGE_SIZE))
        )
        for item in page.items:
            changed += yield from _convert(state, item, now_ms)
        cursor = page.response.get("LastEvaluatedKey") or None
        yield from save_progress(state, version, PHASE, cursor, done + changed)
        if cursor is None:
            return StepOutcome(version, "up", changed)


def _convert(state: RepoState, item: dict[str, Any] | None, now_ms: int) -> Flow[int]:
    """1 if this run converted the item; 0 if it was gone or a client converted it."""
    key = None if item is None else {keys.PK: item[keys.PK], keys.SK: item[keys.SK]}
    for _ in range(RETRIES):
        if item is None:
            return 0
        params = conversion(state.table, item, now_ms)
        if params is None:
            return 0
        result = yield from one(Call("update_item", params))
        if result.ok:
            return 1
        # A client wrote the item since it was read: read it again and convert that.
        assert key is not None
        again = yield from one(Call("get_item", keys.get_consistent(state.table, key)))
        item = again.item
    raise SchemaVersionError(
        f"bucket item {key} of table {state.table!r} kept changing while being converted; "
        "run `zae-limiter migrate` again to resume"
    )
