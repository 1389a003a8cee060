"""One entity's part of an acquire: take tokens from one bucket shard, or say why not.

The state machine: a conditional write planned from the best image at hand (a
speculative one from this client's memory, or a read); then, from the state DynamoDB
returned, create the bucket (shard k >= 1 from its donor: flows/scaling/split.py), try again from
the ALL_OLD a lost race returns (never a read), or reject. After a good write
(`after_write`), a crashed client's reserves the item shows are charged
(flows/reserves/lost.py), or flows/scaling/doubling.py decides whether shard 0 should
double the shard count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import CONTENDED, RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, Result, Stopped, one, pause
from zae_limiter.flows.backoff import backoff_ms
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.reserves.lost import charge_lost
from zae_limiter.flows.scaling import sessions
from zae_limiter.flows.scaling.doubling import scale_after_write
from zae_limiter.flows.scaling.split import Unmade, create_split_shard, read_for_take
from zae_limiter.flows.write.levels import Level, Rejected, Taken, WritePlan
from zae_limiter.flows.write.memory import image_of_age, learn, remember
from zae_limiter.flows.write.plan import expires_at_s, new_bucket, plan_write
from zae_limiter.models import BucketState

#: A lost race is retried from ALL_OLD. Near empty, with reserves out, other clients'
#: flushes move the full-at time (spent reserve tokens leave the held count for it) and
#: fail a bounded take whose tokens are still there: each retry sees them, so allow more
#: than the handful a bucket without reserves needs.
MAX_WRITE_ATTEMPTS = 10
#: The backoff after a lost race: full jitter, the bound from 5 ms doubling up to 200 ms.
RACE_FIRST_MS = 5
RACE_CAP_MS = 200
NOT_FETCHED: Any = object()


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
    since = now_ms
    where = (level.resource, level.shard_id)
    remembered = image_of_age(state, level.entity_id, where, now_ms) if speculative else None
    if prefetched is not NOT_FETCHED:
        item = prefetched
    elif remembered is not None:
        (item, since), confirmed = remembered, False
    else:
        # No image to plan from, or one too old. A write planned blind (as if the bucket
        # were full and held nothing) cannot name the held counts of reserves taken before
        # it, which may have expired and count as spent (flows/write/plan.py, `watched_epochs`).
        # A shard this client never wrote may not exist yet either (shard 0 records a
        # doubling before the new shards are made). A read takes no write capacity.
        # One that may be unmade is read with what making it needs (flows/scaling/split.py).
        item = yield from read_for_take(state, level, key, now_ms)
    if confirmed and item:
        # What DynamoDB just showed is this client's image now: should this write be
        # throttled, the next one plans from it instead of reading again.
        learn(state, level, item, now_ms)
    # A failed conditional write takes the partition's write capacity as a good one does,
    # but only a good one counts in the item's write-rate window. So the next good write
    # of this client there counts them too (those of earlier takes that ended throttled
    # or rejected as well), or a partition busy with lost races (a bucket that sits full,
    # written by many clients at once) looks quiet, and its throttles never double it.
    meta = state.entities.get(level.entity_id)
    failed = _Failed(_uncounted(state, level, now_ms) if meta and meta.uncounted.failed else 0)
    try:
        return (yield from _write(state, level, key, now_ms, item, (confirmed, since), failed))
    finally:
        if failed.count:
            _leave_uncounted(state, level, failed.count, now_ms)


@dataclass(slots=True)
class _Failed:
    """This take's failed conditional writes on the bucket, not yet counted in a window."""

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
    if meta is None or not meta.uncounted.failed:
        return 0
    return meta.uncounted.take(level.resource, now_ms, UNCOUNTED_MS)


def _leave_uncounted(state: RepoState, level: Level, count: int, now_ms: int) -> None:
    meta = state.entities.get(level.entity_id)
    if meta is not None and count:
        meta.uncounted.leave(level.resource, count, now_ms, MAX_UNCOUNTED)


def _write(
    state: RepoState,
    level: Level,
    key: keys.Item,
    now_ms: int,
    item: Any,
    seen: tuple[bool, int],
    failed: _Failed,
) -> Flow[Taken | Rejected]:
    """The write loop from a first image: create, plan, write; a lost race re-plans from
    the ALL_OLD it returns. `seen`: whether the image is DynamoDB's answer just now (else
    this client's memory), and when it was taken."""
    confirmed, since = seen
    meta = state.entities.get(level.entity_id)
    where = (level.resource, level.shard_id)
    start = None if meta is None else meta.shards.starts.get(where)
    # A window younger than WINDOW_MS is never restarted (`needs_reset`): asked of its
    # start first, since nearly every write lands in a young window.
    reset = (
        meta is not None
        and start is not None
        and now_ms - start >= keys.WINDOW_MS
        and meta.shards.needs_reset(where, now_ms)
    )
    wanted = _pending_doubling(state, level) if meta is not None and meta.shards.wanted else None
    # The first write from memory is a guess; the ones after it come from DynamoDB.
    for attempt in range(MAX_WRITE_ATTEMPTS + (0 if confirmed else 1)):
        if confirmed and not item:
            unmade = item if isinstance(item, Unmade) else None
            created, level, item = yield from _create_or_find(
                state, level, key, now_ms, (attempt, unmade), failed
            )
            if created is not None:
                return created
            continue
        bucket = keys.decode_bucket(item) if item else _unknown(level)
        if confirmed and _drained(level, bucket):
            # A shard a merge drained (its count at or below its id): once its freeze
            # ends it refills like any bucket, but its share went to its receiver. A
            # client that still routes here takes from the receiver instead.
            return (yield from take(state, _receiver(level, bucket), now_ms, speculative=True))
        if confirmed:
            level = _with_shard_count(level, bucket)
        elif meta is not None and meta.shards.counts.get(level.resource, 1) > bucket.shard_count:
            bucket = _at_known_count(state, level, bucket)  # a doubling this client knows of
        # Only a shard k >= 1 joins shard 0's sessions (`sessions.unjoined`).
        needed = sessions.unjoined(level, bucket, now_ms) if level.shard_id else ()
        if needed:
            joining = yield from sessions.joined(state, level, needed, now_ms)
            if joining is None:  # no session open: shard 0 opens it with this take
                zero = replace(level, shard_id=0, flush=None, joined={})
                return (yield from take(state, zero, now_ms, speculative=True))
            level = joining
        # The write moves the item's expiry; a doubling removes it (flows/write/plan.py), in
        # the part it adds below.
        expiry = None
        if state.bucket_expiry and wanted is None:
            ttl = expires_at_s(level.limits, bucket.shard_count, now_ms, level.bucket_ttl_s)
            expiry = (ttl,)
        plan = plan_write(
            bucket, level, now_ms, state.table, key, reset, confirmed, failed.count, since, expiry
        )
        if isinstance(plan, Rejected):
            # The item carries the entity's facts: an entity with no META record is
            # then known, and its next rejection can be local (no config round trip).
            state.entities.learn(
                level.entity_id,
                bucket.cascade,
                bucket.parent_id,
                of=level.resource,
                bypass=bool(item and keys.get_bool(item, keys.A_BYPASS)),
            )
            remember(state, level, plan)
            return plan
        params = plan.params
        if wanted is not None:
            params = keys.with_doubling(params, wanted[0], wanted[0] * 2, now_ms, wanted[1])
            if state.bucket_expiry:
                count = bucket.shard_count * 2
                params = keys.with_expiry(params, expiry_of(level, count, now_ms))
        # A throttle raises here and leaves the doubling wished for: on a partition that
        # refuses most writes, it rides on whichever write of this client gets through.
        # Yielded directly (not through `one`): one frame less on every acquire.
        result: Result = yield Call("update_item", params)
        if wanted is not None:
            state.entities[level.entity_id].shards.drop_wanted(level.resource)
            wanted = None
        if result.ok:
            failed.count = 0  # counted by this write
            after = result.response.get("Attributes") or {}
            return (yield from _written(state, level, after, now_ms, plan))
        failed.count += 1
        level = yield from _lost_race(state, level, result, confirmed, attempt, now_ms)
        item, confirmed, since = result.old, True, now_ms
    raise RateLimiterUnavailable(
        f"bucket {level.entity_id}/{level.resource} is too contended: "
        f"{MAX_WRITE_ATTEMPTS} conditional writes failed in a row",
        code=CONTENDED,
    )


def _create_or_find(
    state: RepoState,
    level: Level,
    key: keys.Item,
    now_ms: int,
    tried: tuple[int, Unmade | None],
    failed: _Failed,
) -> Flow[tuple[Taken | None, Level, Any]]:
    """(the take, when creating the bucket was it; the level with the entity's facts; the
    item as it is when another client created it first, or the split shard). `tried`:
    the attempt, and what the read that found the shard absent showed of its donors."""
    attempt, unmade = tried
    level = yield from _with_entity_facts(state, level)
    result, item = yield from _create(state, level, key, now_ms, unmade)
    if result is not None and result.ok:
        return _taken(level, item, now_ms, False), level, item  # new: no reserve to report
    if result is not None:
        failed.count += 1
        yield from pause(_backoff_ms(state, attempt))  # another client created it first
    return None, level, item


def after_write(
    state: RepoState, level: Level, attributes: Mapping[str, Any], now_ms: int
) -> Flow[None] | None:
    """Learn from a good write's ALL_NEW; then the one follow-up write it may call for
    (None, the common case: no generator is made): charging a crashed client's reserves
    (flows/reserves/lost.py), else a doubling or a count to propagate
    (flows/scaling/doubling.py)."""
    meta = learn(state, level, attributes, now_ms)
    if meta is None:
        return None
    if keys.RESERVE_MARK in "\n".join(attributes):  # held counts: maybe a crashed client's
        lost = charge_lost(state, level, attributes, now_ms)
        if lost is not None:
            return lost
    return scale_after_write(state, meta, level, attributes, now_ms)


def _written(
    state: RepoState, level: Level, after: Mapping[str, Any], now_ms: int, plan: WritePlan
) -> Flow[Taken]:
    more = after_write(state, level, after, now_ms)
    flushed = level.flush is not None
    taken = _taken(level, after, now_ms, flushed, plan.held_milli, plan.epoch)
    if more is not None:
        # Stopped: the acquire stops (another level refused); what this write took is
        # still returned, to be given back, and the follow-up waits for the next write.
        with contextlib.suppress(Stopped):
            yield from more
    return taken


def _lost_race(
    state: RepoState, level: Level, result: Result, confirmed: bool, attempt: int, now_ms: int
) -> Flow[Level]:
    """After a failed condition: learn from ALL_OLD, back off, and give up the reserve."""
    if result.old:
        # The item as it is: the next acquires plan from it, and a count that grew
        # spreads them (a client that kept the old one would keep writing shard 0,
        # failing on its count and losing the race to the partition's capacity).
        learn(state, level, result.old, now_ms)
    if confirmed:
        yield from pause(_backoff_ms(state, attempt))
        if level.hold_milli:
            # A reserve is granted only if as much again stays behind: its floor is
            # about all the shard holds, which any concurrent take breaks. A shard
            # this contended is no place for a reserve: take only what is needed.
            return replace(level, hold_milli={})
    return level


def _at_known_count(state: RepoState, level: Level, bucket: BucketState) -> BucketState:
    """A remembered image, planned at the shard count this client knows now when that is
    higher: a doubling keeps every shard's full-at times and raises its count (its donor
    split or a propagation, flows/scaling/split.py), and within a second or two of one
    most shards record the new count. Planned at the image's count, each such write
    failed its count condition once per shard and client (measured: 90-150 of the
    requests of `reserve=False` at 8x a partition), and the failures counted as lost
    races in the windows that decide the next doubling. A shard that still records the
    old count fails the condition instead, and the ALL_OLD decides, as for any guess."""
    meta = state.entities.get(level.entity_id)  # `RepoState.shard_count`, inline
    known = 1 if meta is None else meta.shards.counts.get(level.resource, 1)
    if known <= bucket.shard_count or level.shard_id >= known:
        return bucket
    return replace(bucket, shard_count=known)


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
    wanted = meta.shards.wanted.get(level.resource)
    return wanted if wanted is not None and wanted[0] == level.shard_count else None


def _create(
    state: RepoState, level: Level, key: keys.Item, now_ms: int, unmade: Unmade | None = None
) -> Flow[tuple[Any, Any]]:
    """Create the bucket: (result, the item as written); (result, ALL_OLD) when another
    client created it first; or (None, item) when a split shard has to be consumed from."""
    if level.shard_id == 0:
        bucket = new_bucket(level, now_ms, state.partition_wcu)
        item = keys.new_bucket_item(state.namespace, bucket, now_ms)
        if state.bucket_expiry:
            expires = expiry_of(level, bucket.shard_count, now_ms)
            item = keys.item_with_expiry(item, expires)
        result = yield from one(Call("put_item", keys.create_bucket(state.table, item)))
        if result.ok:
            learn(state, level, item, now_ms)
            return result, item
        return result, result.old
    item = yield from create_split_shard(state, level, now_ms, unmade)
    return None, item


def _drained(level: Level, bucket: BucketState) -> bool:
    """Whether the item read is a shard a merge retired (docs/aggregator.md)."""
    return level.shard_id >= bucket.shard_count


def _receiver(level: Level, bucket: BucketState) -> Level:
    """The shard a merge drained `level`'s shard into, at the count the drained one records."""
    count = bucket.shard_count
    return replace(level, shard_id=level.shard_id % count, shard_count=count, flush=None, joined={})


def _with_shard_count(level: Level, bucket: BucketState) -> Level:
    if bucket.shard_count == level.shard_count:
        return level
    return replace(
        level, shard_count=bucket.shard_count, cascade=bucket.cascade, parent_id=bucket.parent_id
    )


def _with_entity_facts(state: RepoState, level: Level) -> Flow[Level]:
    """A new bucket records cascade and parent; read META if the cache does not know."""
    meta = state.entities.get(level.entity_id)
    if meta is None or not (meta.facts.record or level.resource in meta.facts.cascade_for):
        key = keys.entity_key(state.namespace, level.entity_id)
        result = yield from one(Call("get_item", {"TableName": state.table, "Key": key}))
        if result.item:
            entity = keys.decode_entity(result.item)
            meta = state.entities.learn(
                level.entity_id,
                entity.cascade,
                entity.parent_id,
                dict(entity.cascade_for),
                bypass=entity.bypass,
            )
    if meta is None:
        return level
    facts = meta.facts
    return replace(level, cascade=facts.cascades(level.resource), parent_id=facts.parent_id)


def _backoff_ms(state: RepoState, attempt: int) -> int:
    """After `attempt + 1` lost races on one bucket (flows/backoff.py)."""
    return backoff_ms(attempt + 1, state.rng, RACE_FIRST_MS, RACE_CAP_MS)


def expiry_of(level: Level, count: int, now_ms: int) -> int | None:
    return expires_at_s(level.limits, count, now_ms, level.bucket_ttl_s)
