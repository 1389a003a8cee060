"""One entity's part of an acquire: take tokens from one bucket shard, or say why not.

The state machine: a speculative conditional write (or a read when speculative writes
are off); then, from the state DynamoDB returned, create the bucket, refill-and-consume
fenced on `rf`, or reject. A failed fenced write returns ALL_OLD, the current item, so
contention retries never re-read. After a write, the partition's measured write rate
decides whether shard 0 should double the shard count.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, one, pause
from zae_limiter.flows.bucket_write import Level, Rejected, Taken, image, learn, remember
from zae_limiter.flows.charge import charge_lost
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.evidence import (
    DOUBLING_THRESHOLD,
    EVIDENCE_SIGMAS,
    evidence_since,
    partition_bound,
    window_seen,
)
from zae_limiter.flows.plan import new_bucket, plan_write
from zae_limiter.flows.shares import donor_of, split_full_at, stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

#: A lost race is retried from ALL_OLD. Near empty, with reserves out, other clients'
#: flushes move the full-at time (spent reserve tokens leave the held count for it) and
#: fail a bounded take whose tokens are still there: each retry sees them, so allow more
#: than the handful a bucket without reserves needs.
MAX_WRITE_ATTEMPTS = 10
#: After a throttled doubling try, this client may try again this soon (not a full window).
THROTTLED_DOUBLING_RETRY_MS = 250
NOT_FETCHED: Any = object()
SHARD_NOT_FOUND = "ShardNotFound"
#: Every conditional write failed: none of them was applied.
CONTENDED = "Contended"


def take(
    state: RepoState,
    level: Level,
    now_ms: int,
    speculative: bool,
    prefetched: Any = NOT_FETCHED,
) -> Flow[Taken | Rejected]:
    """Take `level.consume_milli` from one bucket shard.

    The first write is planned from the best image at hand: `prefetched` (the item, or
    None when absent, read in the config round trip), else this client's memory of its
    last write there (speculative), else a read. A failed write's ALL_OLD is the next
    image: contention retries never re-read.
    """
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, level.shard_id)
    confirmed = True
    remembered = image(state, level) if speculative else None
    if prefetched is not NOT_FETCHED:
        item = prefetched
    elif speculative and (remembered is not None or level.shard_id == 0):
        item, confirmed = remembered, False
    else:
        # A shard this client never wrote may not exist yet (shard 0 records a doubling
        # before the new shards are made): a blind write there fails, and a fleet's blind
        # writes fill the new partition so the write that would create it is throttled.
        # A read takes none of its write capacity.
        read = yield from one(
            Call("get_item", {"TableName": state.table, "Key": key, "ConsistentRead": True})
        )
        item = read.item
    # A failed conditional write takes the partition's write capacity as a good one does,
    # but only a good one counts in the item's write-rate window. So the next good write
    # of this client there counts them too (those of earlier takes that ended throttled
    # or rejected as well), or a partition busy with lost races (a bucket that sits full,
    # written by many clients at once) looks quiet, and its throttles never double it.
    failed = _Failed(_uncounted(state, level, now_ms))
    try:
        return (yield from _write(state, level, key, now_ms, item, confirmed, failed))
    finally:
        _leave_uncounted(state, level, failed.count, now_ms)


@dataclass(slots=True)
class _Failed:
    """Failed conditional writes on one shard not yet counted in its window."""

    count: int


#: Uncounted failed writes a client carries per bucket, at most, and for how long (ms):
#: older ones belong to a window that is gone, and a pile of them would make the next
#: window look hotter than the partition is. They are counted by the client's next good
#: write to any shard of the bucket: an entity's acquires spread evenly over its shards,
#: so one shard's window stands for the others', and a client that writes each of many
#: shards only now and then would otherwise never count its lost races at all.
MAX_UNCOUNTED = MAX_WRITE_ATTEMPTS
UNCOUNTED_MS = keys.WINDOW_MS


def _uncounted(state: RepoState, level: Level, now_ms: int) -> int:
    meta = state.entities.get(level.entity_id)
    if meta is None:
        return 0
    count, since = meta.failed_writes.pop(level.resource, (0, now_ms))
    return count if now_ms - since <= UNCOUNTED_MS else 0


def _leave_uncounted(state: RepoState, level: Level, count: int, now_ms: int) -> None:
    meta = state.entities.get(level.entity_id)
    if meta is not None and count:
        meta.failed_writes[level.resource] = (min(count, MAX_UNCOUNTED), now_ms)


def _write(
    state: RepoState,
    level: Level,
    key: keys.Item,
    now_ms: int,
    item: Any,
    confirmed: bool,
    failed: _Failed,
) -> Flow[Taken | Rejected]:
    """The write loop from a first image: create, plan, write; a lost race re-plans from
    the ALL_OLD it returns."""
    reset = state.window_needs_reset(level.entity_id, level.resource, level.shard_id, now_ms)
    wanted = _pending_doubling(state, level)
    # The first write from memory is a guess; the ones after it come from DynamoDB.
    for attempt in range(MAX_WRITE_ATTEMPTS + (0 if confirmed else 1)):
        if confirmed and not item:
            level = yield from _with_entity_facts(state, level)
            result, item = yield from _create(state, level, key, now_ms)
            if result is not None and result.ok:
                return _taken(level, item, now_ms, False)  # a new item: no reserve to report
            if result is not None:
                failed.count += 1
                yield from pause(_backoff_ms(attempt))  # another client created it first
            continue
        bucket = keys.decode_bucket(item) if item else _unknown(level)
        if confirmed:
            level = _with_shard_count(level, bucket)
        plan = plan_write(bucket, level, now_ms, state.table, key, reset, confirmed, failed.count)
        if isinstance(plan, Rejected):
            # The item carries the entity's facts: an entity with no META record is
            # then known, and its next rejection can be local (no config round trip).
            state.learn_entity(level.entity_id, bucket.cascade, bucket.parent_id)
            remember(state, level, plan)
            return plan
        params = plan.params
        if wanted is not None:
            params = keys.with_doubling(params, wanted[0], wanted[0] * 2, now_ms, wanted[1])
            state.entities[level.entity_id].want_double.pop(level.resource, None)
            wanted = None
        result = yield from one(Call("update_item", params))
        if result.ok:
            failed.count = 0  # counted by this write
            after = result.attributes
            more = _after_write(state, level, after, now_ms)
            if more is not None:
                yield from more
            flushed = level.flush is not None
            return _taken(level, after, now_ms, flushed, plan.held_milli, plan.epoch)
        failed.count += 1
        if result.old:
            # The item as it is: the next acquires plan from it, and a count that grew
            # spreads them (a client that kept the old one would keep writing shard 0,
            # failing on its count and losing the race to the partition's capacity).
            learn(state, level, result.old)
        if confirmed:
            yield from pause(_backoff_ms(attempt))
            if level.hold_milli:
                # A reserve is granted only if as much again stays behind: its floor is
                # about all the shard holds, which any concurrent take breaks. A shard
                # this contended is no place for a reserve: take only what is needed.
                level = replace(level, hold_milli={})
        item, confirmed = result.old, True
    raise RateLimiterUnavailable(
        f"bucket {level.entity_id}/{level.resource} is too contended: "
        f"{MAX_WRITE_ATTEMPTS} conditional writes failed in a row",
        code=CONTENDED,
    )


def _unknown(level: Level) -> BucketState:
    """A shard this client never wrote: planned as full, the write's conditions tell."""
    return BucketState(
        entity_id=level.entity_id,
        resource=level.resource,
        shard_id=level.shard_id,
        shard_count=level.shard_count,
        last_refill_ms=0,
        limits={},
    )


def _taken(
    level: Level,
    after: Mapping[str, Any] | None,
    now_ms: int,
    flushed: bool,
    held_milli: Mapping[str, int] | None = None,
    epoch: int = 0,
) -> Taken:
    return Taken(
        level.entity_id,
        level.resource,
        level.shard_id,
        level.consume_milli,
        level.limits,
        held_milli or {},
        epoch,
        flushed=flushed,
        after=after,
        at_ms=now_ms,
    )


def _pending_doubling(state: RepoState, level: Level) -> tuple[int, int] | None:
    meta = state.entities.get(level.entity_id)
    if meta is None or level.shard_id != 0:
        return None
    wanted = meta.want_double.get(level.resource)
    return wanted if wanted is not None and wanted[0] == level.shard_count else None


def _create(state: RepoState, level: Level, key: keys.Item, now_ms: int) -> Flow[tuple[Any, Any]]:
    """Create the bucket: (result, the item as written); (result, ALL_OLD) when another
    client created it first; or (None, item) when a split shard has to be consumed from."""
    if level.shard_id == 0:
        bucket = new_bucket(level, now_ms, state.partition_wcu)
        item = keys.new_bucket_item(state.namespace, bucket, now_ms)
        result = yield from one(Call("put_item", keys.create_bucket(state.table, item)))
        if result.ok:
            learn(state, level, item)
            return result, item
        return result, result.old
    item = yield from create_split_shard(state, level, now_ms)
    return None, item


def create_split_shard(state: RepoState, level: Level, now_ms: int) -> Flow[Any]:
    """Create shard k >= 1 from its sibling, so no tokens are created.

    After a doubling from n to 2n shards, shard k's sibling is k - n. The sibling first
    records the new count (its full-at times then stand for half the share), then the new
    shard copies its full-at times: the two hold what the sibling held. Returns the
    shard's item as it now stands.
    """
    ns = state.namespace
    first = yield from _read_shard(state, level, 0)
    if not first.item:
        raise RateLimiterUnavailable(
            f"shard 0 of {level.entity_id}/{level.resource} is missing; "
            f"cannot create shard {level.shard_id}"
        )
    shard0 = keys.decode_bucket(first.item)
    count = shard0.shard_count
    if count <= level.shard_id:
        # A shard that shard 0 does not know (a probe, or a stale count after a merge):
        # it must not be made up. Shard 0's count is the truth from here on.
        meta = state.learn_entity(level.entity_id, shard0.cascade, shard0.parent_id)
        meta.shard_counts[level.resource] = count
        raise RateLimiterUnavailable(
            f"{level.entity_id}/{level.resource} has {count} shard(s); "
            f"shard {level.shard_id} does not exist",
            code=SHARD_NOT_FOUND,
        )
    donor_id = donor_of(level.shard_id)
    donor = shard0
    if donor_id:
        read = yield from _read_shard(state, level, donor_id)
        # A sibling that was never created itself: shard 0 gives instead.
        donor, donor_id = (keys.decode_bucket(read.item), donor_id) if read.item else (shard0, 0)
    full_at = yield from _split_off(state, level, donor, donor_id, count, now_ms)
    if full_at is None:
        return (yield from _current(state, level))
    shard_level = replace(level, consume_milli={}, hold_milli={}, flush=None, shard_count=count)
    bucket = new_bucket(shard_level, now_ms, state.partition_wcu, full_at)
    # It may be a donor itself, to shards the count already has: what it gives them is
    # what it held when it was made, as after a count raise.
    made = {name: at for name, at in full_at.items() if at is not None}
    bucket = replace(bucket, split_full_at=made)
    item = keys.new_bucket_item(ns, bucket, now_ms)
    put = yield from one(Call("put_item", keys.create_bucket(state.table, item)))
    return item if put.ok else put.old


def _read_shard(state: RepoState, level: Level, shard_id: int) -> Flow[Any]:
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, shard_id)
    return (
        yield from one(
            Call("get_item", {"TableName": state.table, "Key": key, "ConsistentRead": True})
        )
    )


def _split_off(
    state: RepoState, level: Level, donor: BucketState, donor_id: int, count: int, now_ms: int
) -> Flow[dict[str, int | None] | None]:
    """The donor's full-at times once it records `count`; None when its count moved past.

    A donor that is throttled (it is usually the hot partition) is not written: the new
    shard then starts empty and fills at its share of the rate, so no tokens are created.
    """
    if donor.shard_count < count:
        key = keys.bucket_key(state.namespace, level.entity_id, level.resource, donor_id)
        names = [limit.name for limit in level.limits]
        params = keys.set_shard_count(state.table, key, donor.shard_count, count, names)
        try:
            moved = yield from one(Call("update_item", params))
        except RateLimiterUnavailable as error:
            if not error.throttled:
                raise
            return {limit.name: _empty(limit, count, now_ms) for limit in level.limits}
        seen = moved.attributes if moved.ok else moved.old
        if not seen:
            return None
        donor = keys.decode_bucket(seen)
        if donor.shard_count != count:
            return None
    return {limit.name: split_full_at(donor, limit, now_ms) for limit in level.limits}


def _empty(limit: Limit, count: int, now_ms: int) -> int:
    cfg = stored_config(limit)
    return cfg.with_tokens(0, now_ms, count)


def _current(state: RepoState, level: Level) -> Flow[Any]:
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, level.shard_id)
    read = yield from one(
        Call("get_item", {"TableName": state.table, "Key": key, "ConsistentRead": True})
    )
    return read.item


def _after_write(
    state: RepoState, level: Level, attributes: Mapping[str, Any], now_ms: int
) -> Flow[None] | None:
    """Learn from ALL_NEW; the flow that doubles the shards when this partition runs hot,
    or propagates the count (None, the common case: no generator is made).

    A shard that still records an older count than shard 0 is told the new one first:
    clients that write to it learn the count from its ALL_NEW, and until they do, its
    rate includes their traffic meant for fewer shards, which is no reason to double.
    """
    meta = learn(state, level, attributes)
    if meta is None:
        return None
    lost = charge_lost(state, level, attributes, now_ms)
    if lost is not None:
        return lost
    count = meta.shard_counts.get(level.resource, 1)
    seen = window_seen(attributes, now_ms, state.partition_wcu)
    if level.shard_id and seen.shard_count < count:
        return _propagate(state, level, count, now_ms)
    meta.seen_windows[(level.resource, level.shard_id)] = seen
    if partition_bound(seen, DOUBLING_THRESHOLD, EVIDENCE_SIGMAS):
        names = [limit.name for limit in level.limits]
        since = evidence_since(seen)
        return double(state, level.entity_id, level.resource, now_ms, since, False, names)
    return None


def _propagate(state: RepoState, level: Level, count: int, now_ms: int) -> Flow[None]:
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, level.shard_id)
    try:
        names = [limit.name for limit in level.limits]
        params = keys.propagate_shard_count(state.table, key, count, names, now_ms=now_ms)
        yield from one(Call("update_item", params))
    except RateLimiterUnavailable:
        return  # a hot shard: the next write to it tries again


def double(
    state: RepoState,
    entity_id: str,
    resource: str,
    now_ms: int,
    measured_since: int,
    confirm: bool = False,
    limits: Sequence[str] = (),
) -> Flow[None]:
    """One conditional write on shard 0; at most one try per client per window.

    `measured_since` is when the evidence began (the write-rate window's start); shard 0
    refuses evidence older than its last doubling. With `confirm` (a throttled client,
    whose view may be seconds old) shard 0 is read first: a write to a hot partition
    that its condition then refuses would spend the capacity the partition lacks.
    """
    meta = state.learn_entity(entity_id, False, None)
    count = meta.shard_counts.get(resource, 1)
    last = meta.doubling_tried.get(resource)
    if count * 2 > state.max_shards or (last is not None and now_ms - last < keys.WINDOW_MS):
        return
    meta.doubling_tried[resource] = now_ms
    key = keys.bucket_key(state.namespace, entity_id, resource, 0)
    if confirm and not (yield from _still_due(state, key, resource, count, measured_since)):
        return
    try:
        params = keys.double_shards(
            state.table, key, count, count * 2, now_ms, measured_since, limits
        )
        result = yield from one(Call("update_item", params))
    except RateLimiterUnavailable:
        # Shard 0 is throttled too. Try again soon (after the next good write), not after a
        # whole window: the doubling is what relieves it. Other clients try as well.
        meta.doubling_tried[resource] = now_ms - keys.WINDOW_MS + THROTTLED_DOUBLING_RETRY_MS
        meta.want_double[resource] = (count, measured_since)
        return
    seen = result.attributes if result.ok else (result.old or {})
    if seen:
        meta.shard_counts[resource] = max(count, keys.decode_bucket(seen).shard_count)


def _still_due(
    state: RepoState, key: keys.Item, resource: str, count: int, since: int
) -> Flow[bool]:
    """Whether shard 0 still has `count` shards and no doubling since `since` (it learns
    a higher count on the way: the caller then spreads over it instead)."""
    read = yield from one(
        Call("get_item", {"TableName": state.table, "Key": key, "ConsistentRead": True})
    )
    if not read.item:
        return True
    shard0 = keys.decode_bucket(read.item)
    if shard0.shard_count > count:
        meta = state.learn_entity(shard0.entity_id, shard0.cascade, shard0.parent_id)
        meta.shard_counts[resource] = shard0.shard_count
        return False
    return keys.get_n(read.item, keys.A_SHARD_DOUBLED, 0) <= since


def _with_shard_count(level: Level, bucket: BucketState) -> Level:
    if bucket.shard_count == level.shard_count:
        return level
    return replace(
        level, shard_count=bucket.shard_count, cascade=bucket.cascade, parent_id=bucket.parent_id
    )


def _with_entity_facts(state: RepoState, level: Level) -> Flow[Level]:
    """A new bucket records cascade and parent; read META if the cache does not know."""
    meta = state.entities.get(level.entity_id)
    if meta is None:
        key = keys.entity_key(state.namespace, level.entity_id)
        result = yield from one(Call("get_item", {"TableName": state.table, "Key": key}))
        if result.item:
            entity = keys.decode_entity(result.item)
            meta = state.learn_entity(level.entity_id, entity.cascade, entity.parent_id)
    if meta is None:
        return level
    return replace(level, cascade=meta.cascade, parent_id=meta.parent_id)


def _backoff_ms(attempt: int) -> int:
    # Full jitter: concurrent writers that collided spread out instead of colliding again.
    return random.randint(0, min(200, 5 * 2**attempt))
