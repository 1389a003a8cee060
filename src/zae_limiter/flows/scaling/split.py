"""A new shard made from its donor, so that a doubling creates no tokens and loses none.

After shard 0 raised the count from n to 2n, shard k's donor is k - n (flows/write/shares.py).
The donor first records the new count (its full-at times then stand for half its share,
and it snapshots them for the shards it gives to), then the new shard copies them: the
two hold what the donor held.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.errors import CONCURRENT_CHANGE, SHARD_NOT_FOUND, RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling import fractions, sessions
from zae_limiter.flows.write.levels import Level
from zae_limiter.flows.write.memory import learn
from zae_limiter.flows.write.plan import new_bucket
from zae_limiter.flows.write.shares import donor_of, split_full_at, stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

#: In an `Unmade`, an item the batch did not read (left unprocessed): read it alone.
NOT_READ: Any = object()


@dataclass(frozen=True, slots=True)
class Unmade:
    """A shard read absent, with shard 0 and its donor as the same read showed them (None:
    absent; NOT_READ: not read): what making it needs, so it is not read again. Falsy, as
    an absent item is."""

    shard0: Any
    donor: Any

    def __bool__(self) -> bool:
        return False


#: From this count on, a shard that may be unmade is read with shard 0 and its donor
#: (`read_for_take`): all but one of the shards a count of 32 is made of.
BATCH_FROM_COUNT = 4


def may_be_unmade(state: RepoState, level: Level) -> bool:
    """Whether a shard this client is about to read may not be made yet (from a count of
    BATCH_FROM_COUNT on): shards below half the count are all made before it was raised
    (flows/scaling/made.py), and a shard this client holds an image of exists."""
    shard = level.shard_id
    if level.shard_count < BATCH_FROM_COUNT or shard < level.shard_count // 2:
        return False
    meta = state.entities.get(level.entity_id)
    return meta is None or meta.images.get((level.resource, shard)) is None


def read_for_take(state: RepoState, level: Level, key: keys.Item, now_ms: int) -> Flow[Any]:
    """The shard's item (a consistent read; None when absent). A shard that may be unmade
    (`may_be_unmade`) is read in one BatchGetItem with shard 0 and its donor, which making
    it needs: an absent one comes back as `Unmade`, and a shard that is there, with shard
    0's and the donor's images, which this client learns as a read's (its next write
    there plans from them). Measured: `reserve=False` at 8x a partition, fixed window
    without reasons, spent 215 GetItems of 2,249 requests reading shard 0 and donors for
    shards being made, one attempt after another."""
    if not may_be_unmade(state, level):
        read = yield from one(Call("get_item", keys.get_consistent(state.table, key)))
        return read.item
    donor_id = donor_of(level.shard_id)
    ids = [level.shard_id, 0] + ([donor_id] if donor_id else [])
    params = keys.shards_read(state.table, state.namespace, level.entity_id, level.resource, ids)
    result = yield from one(Call("batch_get_item", params))
    answer = result.response
    found = {keys.key_id(item): item for item in answer.get("Responses", {}).get(state.table, [])}
    unread = answer.get("UnprocessedKeys", {}).get(state.table, {}).get("Keys", [])
    skipped = {keys.key_id(k) for k in unread}

    def seen(shard: int) -> Any:
        key_of = keys.bucket_key(state.namespace, level.entity_id, level.resource, shard)
        where = keys.key_id(key_of)
        return NOT_READ if where in skipped else found.get(where)

    item = seen(level.shard_id)
    if item is NOT_READ:
        read = yield from one(Call("get_item", keys.get_consistent(state.table, key)))
        return read.item
    others = {0: seen(0), donor_id: seen(donor_id)} if donor_id else {0: seen(0)}
    if item:
        for shard, other in others.items():
            if other and other is not NOT_READ:
                learn(state, replace(level, shard_id=shard), other, now_ms)
        return item
    return Unmade(others[0], others[donor_id] if donor_id else NOT_READ)


def create_split_shard(
    state: RepoState, level: Level, now_ms: int, read: Unmade | None = None
) -> Flow[Any]:
    """Create shard k >= 1 from its sibling, so no tokens are created.

    After a doubling from n to 2n shards, shard k's sibling is k - n. The sibling first
    records the new count (its full-at times then stand for half the share), then the new
    shard copies its full-at times: the two hold what the sibling held. Returns the
    shard's item as it now stands.

    The put goes in one transaction with a check that shard 0 still stands as read (its
    count, no deletion under way): a client that knew the entity before it was deleted
    cannot make a shard of it afterwards (docs/resilience.md).
    """
    ns = state.namespace
    first = read.shard0 if read is not None else NOT_READ
    if first is NOT_READ:
        first = (yield from _read_shard(state, level, 0)).item
    if not first:
        raise RateLimiterUnavailable(
            f"shard 0 of {level.entity_id}/{level.resource} is missing; "
            f"cannot create shard {level.shard_id}"
        )
    if keys.A_DELETING in first:
        # A deletion marked it: under way, or its process died there (the record and
        # configs go first, so the entity is gone either way). Clients may not delete
        # (least privilege): the message says who finishes it.
        raise RateLimiterUnavailable(
            f"{level.entity_id}/{level.resource} is being deleted, or a deletion of it "
            f"stopped part way: `zae-limiter entity delete {level.entity_id}` finishes it",
            code=CONCURRENT_CHANGE,
        )
    shard0 = keys.decode_bucket(first)
    count = shard0.shard_count
    if count <= level.shard_id:
        # A shard that shard 0 does not know (a probe, or a stale count after a merge):
        # it must not be made up. Shard 0's count is the truth from here on.
        meta = state.entities.learn(
            level.entity_id, shard0.cascade, shard0.parent_id, of=level.resource
        )
        meta.shards.told(level.resource, count)
        raise RateLimiterUnavailable(
            f"{level.entity_id}/{level.resource} has {count} shard(s); "
            f"shard {level.shard_id} does not exist",
            code=SHARD_NOT_FOUND,
        )
    donor_id = donor_of(level.shard_id)
    donor = shard0
    if donor_id:
        sibling = read.donor if read is not None else NOT_READ
        if sibling is NOT_READ:
            sibling = (yield from _read_shard(state, level, donor_id)).item
        # A sibling that was never created itself: shard 0 gives instead.
        donor, donor_id = (keys.decode_bucket(sibling), donor_id) if sibling else (shard0, 0)
    full_at = yield from _split_off(state, level, donor, donor_id, count, now_ms)
    if full_at is None:
        return (yield from _read_shard(state, level, level.shard_id)).item
    shard_level = replace(level, consume_milli={}, hold_milli={}, flush=None, shard_count=count)
    # A quota's fraction of a token goes to shard 0 first (flows/scaling/fractions.py).
    parts = fractions.fractions_of(level.limits, full_at, count, now_ms)
    starts = fractions.session_starts(level.limits, full_at)
    if parts and not (yield from fractions.charge_shard0(state, level, parts, now_ms, starts)):
        parts = {}
    whole = fractions.rounded(level.limits, full_at, parts, count)
    bucket = new_bucket(shard_level, now_ms, state.partition_wcu, whole)
    # It may be a donor itself, to shards the count already has: what it gives them is
    # what it held when it was made, as after a count raise (its fractions included: the
    # shards made from it send theirs to shard 0 in turn).
    made = {name: at for name, at in full_at.items() if at is not None}
    bucket = replace(bucket, split_full_at=made, limits=_uncounted(bucket, parts))
    item = keys.new_bucket_item(ns, bucket, now_ms)
    return (yield from _put(state, level, item, count, parts, now_ms))


def _put(
    state: RepoState, level: Level, item: keys.Item, count: int, parts: Any, now_ms: int
) -> Flow[Any]:
    """Make the shard in one transaction with a check that shard 0 still stands at
    `count`, unfenced; the item as it then stands."""
    first_key = keys.bucket_key(state.namespace, level.entity_id, level.resource, 0)
    params = keys.create_split_bucket(state.table, item, first_key, count)
    written = yield from one(Call("transact_write_items", params))
    if written.ok:
        return item
    if parts:
        # Not made here: shard 0 gets back the fractions it was charged.
        zero = yield from _read_shard(state, level, 0)
        if zero.item:
            yield from fractions.give_back(state, level, 0, parts, zero.item, now_ms)
    reasons = written.response.get("CancellationReasons") or [{}]
    if reasons[0].get("Item"):  # another client made it first
        return reasons[0]["Item"]
    # Shard 0 moved on since it was read (a doubling, a merge), or is being deleted: the
    # shard is made from what shard 0 says now, or not at all.
    raise RateLimiterUnavailable(
        f"shard 0 of {level.entity_id}/{level.resource} changed while shard "
        f"{level.shard_id} was being made; try again",
        code=CONCURRENT_CHANGE,
    )


def _read_shard(state: RepoState, level: Level, shard_id: int) -> Flow[Any]:
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, shard_id)
    return (yield from one(Call("get_item", keys.get_consistent(state.table, key))))


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
        params = keys.set_shard_count(state.table, key, donor.shard_count, count, names, now_ms)
        params = keys.with_expiry(params, None)  # sharded: never expires (flows/write/plan.py)
        try:
            moved = yield from one(Call("update_item", params))
        except RateLimiterUnavailable as error:
            if not error.throttled:
                raise
            return {limit.name: _empty(limit, count, now_ms, donor) for limit in level.limits}
        seen = moved.attributes if moved.ok else moved.old
        if not seen:
            return None
        donor = keys.decode_bucket(seen)
        if donor.shard_count != count:
            return None
        if moved.ok:  # this client split it: its fractions go to shard 0
            yield from fractions.settle_donor(state, level, donor_id, seen, now_ms)
    return {limit.name: split_full_at(donor, limit, now_ms) for limit in level.limits}


def _empty(limit: Limit, count: int, now_ms: int, donor: BucketState) -> int:
    """Empty, as of `now_ms`; a session quota's empty in the session its donor is in
    (shard 0's: every shard joins it), ending with it. Emptied from `now` it would open a
    session of its own, still empty when shard 0's next one opens and whole again in
    its middle (simulator seed 195 of the sessions focus: a token created)."""
    cfg = stored_config(limit)
    start = sessions.open_start(donor, limit, now_ms) if sessions.is_session(limit) else None
    return cfg.with_tokens(0, now_ms if start is None else start, count)


def _uncounted(bucket: BucketState, parts: dict[str, int]) -> dict[str, LimitState]:
    """The new shard's limits, its consumption less what shard 0 was charged for it: a
    fraction moved is not usage (the aggregator sums the items' `tc`)."""
    return {
        name: replace(st, total_consumed_milli=st.total_consumed_milli - parts.get(name, 0))
        for name, st in bucket.limits.items()
    }
