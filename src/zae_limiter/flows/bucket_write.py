"""The arithmetic of one bucket write: what to write, or why the request is rejected.

No requests are made here; `flows.take` runs the state machine that uses these plans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows import Call
from zae_limiter.flows.context import EntityMeta, Exhausted, RepoState
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState, LimitStatus

MAX_WRITE_ATTEMPTS = 6


@dataclass(frozen=True, slots=True)
class Level:
    """What to take from one entity's bucket."""

    entity_id: str
    resource: str
    limits: tuple[Limit, ...]
    consume_milli: Mapping[str, int]
    shard_id: int = 0
    shard_count: int = 1
    cascade: bool = False
    parent_id: str | None = None
    #: A reserve to take on top of `consume_milli` (flows/reserve.py), per limit.
    hold_milli: Mapping[str, int] = field(default_factory=dict)
    #: What this client's reserve of the shard spent since its last write, to report.
    flush: keys.Flush | None = None


@dataclass(frozen=True, slots=True)
class Taken:
    entity_id: str
    resource: str
    shard_id: int
    consumed_milli: Mapping[str, int]
    limits: tuple[Limit, ...]
    #: The reserve the same write moved out, and the epoch whose held count recorded it.
    held_milli: Mapping[str, int] = field(default_factory=dict)
    epoch: int = 0
    #: Served from this client's reserve: no request was made.
    from_reserve: bool = False
    #: The write carried the level's `flush`.
    flushed: bool = False
    #: The shard as the write left it (ALL_NEW) and when: what `remaining` reads, lazily.
    after: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    at_ms: int = field(default=0, compare=False, repr=False)

    def remaining(self) -> dict[str, int] | None:
        """Whole tokens each limit had left right after this write (other clients' writes
        included), refilled to the write's time, plus what the write moved into this
        client's reserve; a shard's figure scaled to the entity by the shard count. None
        when no write was made (served from a reserve). Decodes the item: only on demand."""
        if not self.after:
            return None
        shard = keys.decode_bucket(self.after)
        count = shard.shard_count
        out: dict[str, int] = {}
        for limit in self.limits:
            _share, now = share_now(shard, limit, self.at_ms)
            left = now.tokens_milli + self.held_milli.get(limit.name, 0)
            out[limit.name] = max(0, min(limit.capacity, left * count // 1000))
        return out


@dataclass(frozen=True, slots=True)
class Rejected:
    entity_id: str
    resource: str
    violations: tuple[LimitStatus, ...]
    retry_after_ms: int
    memory: Exhausted | None = None


@dataclass(frozen=True, slots=True)
class WritePlan:
    params: dict[str, Any] = field(default_factory=dict)
    #: The reserve this write takes on top of the acquire (flows/reserve.py), and the
    #: epoch whose held count records it.
    held_milli: Mapping[str, int] = field(default_factory=dict)
    epoch: int = 0


@lru_cache(maxsize=1024)
def stored_config(limit: Limit) -> LimitState:
    """The undivided config a bucket item stores for a limit (tokens unused here)."""
    return LimitState(0, limit.capacity_milli, limit.refill_amount_milli, limit.refill_period_ms)


def effective(limit: Limit, shard_count: int) -> LimitState:
    """A shard's share of an application limit: capacity and refill divided by the count."""
    return LimitState(
        0,
        max(1, limit.capacity_milli // shard_count),
        max(1, limit.refill_amount_milli // shard_count),
        limit.refill_period_ms,
    )


def new_bucket(
    level: Level, now_ms: int, partition_wcu: int, tokens: Mapping[str, int] | None = None
) -> BucketState:
    """A bucket as first written: full (shard 0), or holding `tokens` split off a sibling."""
    limits = {}
    for limit in level.limits:
        cfg = effective(limit, level.shard_count)
        need = level.consume_milli.get(limit.name, 0)
        start = cfg.capacity_milli if tokens is None else tokens.get(limit.name, 0)
        limits[limit.name] = LimitState(
            start - need,
            limit.capacity_milli,
            limit.refill_amount_milli,
            limit.refill_period_ms,
            need,
        )
    return BucketState(
        entity_id=level.entity_id,
        resource=level.resource,
        shard_id=level.shard_id,
        shard_count=level.shard_count,
        last_refill_ms=now_ms,
        limits=limits,
        cascade=level.cascade,
        parent_id=level.parent_id,
        partition_wcu=partition_wcu,
    )


def _status(
    level: Level, name: str, cfg: LimitState, tokens: int, need: int, wait: int
) -> LimitStatus:
    return LimitStatus(
        entity_id=level.entity_id,
        resource=level.resource,
        limit_name=name,
        capacity=cfg.capacity_milli // 1000,
        available=tokens // 1000,
        requested=-(-need // 1000),
        retry_after_seconds=wait / 1000,
    )


def share_now(
    bucket: BucketState, limit: Limit, now_ms: int, shares: int = 1
) -> tuple[LimitState, LimitState]:
    """(the shard's share of `limit` holding the stored tokens, the same refilled to now).

    Tokens held in reserves count against the capacity: a shard refilled while reserves
    are out holds at most its capacity less what they hold, so no more than the capacity
    can ever be spent from it in all. `shares`: how many shards' shares it holds (reads
    only; see `shares_held`).
    """
    cfg = effective(limit, bucket.shard_count)
    stored = bucket.limits.get(limit.name)
    held = keys.held_milli(bucket.reserved.get(limit.name, {}), now_ms)
    capacity = cfg.capacity_milli if shares == 1 else cfg.capacity_milli * shares
    room = capacity - held if held > 0 else capacity
    current = LimitState(
        cfg.capacity_milli if stored is None else stored.tokens_milli,
        room,
        cfg.refill_amount_milli,
        cfg.refill_period_ms,
    )
    return cfg, current.refilled(bucket.last_refill_ms, now_ms) if stored else current


def donor_of(shard_id: int) -> int:
    """The shard a new shard `shard_id` >= 1 splits its share off: its sibling before the
    doubling that made it (shard k - n after n -> 2n shards)."""
    return shard_id - (1 << (shard_id.bit_length() - 1))


def shares_held(shards: Sequence[BucketState]) -> dict[int, int]:
    """How many of shard 0's shares (1 / its count) each shard read holds. After a
    doubling, a shard is made by its first acquire, which splits its share off its donor
    (or off shard 0 when the donor was never made either); until then that share is
    still in the donor."""
    present = {bucket.shard_id: bucket for bucket in shards}
    shard0 = present.get(0)
    held = dict.fromkeys(present, 1)
    if shard0 is None:
        return held
    for shard_id in range(1, shard0.shard_count):
        if shard_id not in present:
            donor = donor_of(shard_id)
            held[donor if donor in present else 0] += 1
    return held


def read_shares(shards: Sequence[BucketState]) -> list[tuple[BucketState, int]]:
    """Each shard read as reads count it, with how many shares it holds: measured in
    shard 0's shares when shard 0 counts it (a shard that has not seen the latest
    doubling yet still records the older count); a shard beyond shard 0's count (a
    merge under way) by its own count."""
    held = shares_held(shards)
    count = next((b.shard_count for b in shards if b.shard_id == 0), None)
    counted = []
    for bucket in shards:
        shares = held[bucket.shard_id]
        if count is not None and bucket.shard_id < count and bucket.shard_count != count:
            bucket = replace(bucket, shard_count=count)
        counted.append((bucket, shares))
    return counted


#: A reserve that the bucket can only grant below this share of what was asked is not
#: worth its tokens idling: the acquire takes exactly what it needs instead.
MIN_GRANT_SHARE = 0.25


def grant(
    hold: Mapping[str, int], tokens: Mapping[str, int], consume: Mapping[str, int]
) -> dict[str, int]:
    """The reserve the bucket can grant: what was asked, scaled down (all limits alike) so
    that at least as much again stays behind; {} when that is too little to be worth it."""
    asked = {name: amount for name, amount in hold.items() if amount > 0}
    if not asked:
        return {}
    share = 1.0
    for name, amount in asked.items():
        spare = tokens.get(name, 0) - consume.get(name, 0)
        share = min(share, max(0, spare // 2) / amount)
    if share < MIN_GRANT_SHARE:
        return {}
    # Whole tokens: acquires and adjustments move whole tokens, so a fraction left in a
    # reserve (or in the bucket) could never be spent by either.
    granted = {name: int(amount * share) // 1000 * 1000 for name, amount in asked.items()}
    return {name: amount for name, amount in granted.items() if amount}


def plan_write(
    bucket: BucketState,
    level: Level,
    now_ms: int,
    table: str,
    key: keys.Item,
    reset_window: bool = True,
    moved_milli: Mapping[str, int] | None = None,
    shard_count: int | None = None,
) -> WritePlan | Rejected:
    """Refill every limit to `now_ms` and consume; a plan to write, or a rejection.

    The refill is written (moving `rf`, fenced on it) only when it must be: when the
    stored tokens do not cover the request, when it would clamp (a refill that fills the
    bucket is lost if it waits), or when a config changes. Otherwise it waits for a later
    write: refill is additive over any split of time, so consuming first loses nothing,
    and the write is an ADD that only checks `rf` is unchanged. Concurrent writers of
    that kind never invalidate each other; only a refill written in between does.
    """
    new_rf = max(bucket.last_refill_ms, now_ms)
    states = {limit.name: share_now(bucket, limit, new_rf) for limit in level.limits}
    refilled_all = {name: refilled for name, (_cfg, refilled) in states.items()}
    fenced = (
        shard_count is not None
        or bool(moved_milli)
        or not _refill_can_wait(bucket, level, states, new_rf)
    )
    if not fenced:
        # The write leaves the refill for later: what it may take is what is stored.
        refilled_all = {name: bucket.limits[name] for name in refilled_all}
    granted = grant(
        level.hold_milli,
        {name: state.tokens_milli for name, state in refilled_all.items()},
        level.consume_milli,
    )
    deltas: dict[str, int] = {}
    floors: dict[str, int] = {}
    fresh: dict[str, LimitState] = {}
    configs: dict[str, LimitState] = {}
    violations: list[LimitStatus] = []
    wait = 0
    for limit in level.limits:
        cfg = states[limit.name][0]
        refilled = refilled_all[limit.name]
        configs[limit.name] = stored_config(limit)
        need = level.consume_milli.get(limit.name, 0)
        stored = bucket.limits.get(limit.name)
        if refilled.tokens_milli < need or refilled.tokens_milli < 0:
            ms = refilled.ms_until(max(need, 0), new_rf, new_rf)
            # More than this shard can ever hold: come back after a full refill period,
            # by when the count may have changed (never a tight retry loop).
            ms = cfg.refill_period_ms if ms < 0 else max(1, ms)
            wait = max(wait, ms)
            violations.append(_status(level, limit.name, cfg, refilled.tokens_milli, need, ms))
            continue
        extra = granted.get(limit.name, 0)
        if stored is None:
            fresh[limit.name] = LimitState(refilled.tokens_milli - need - extra, 0, 0, 1, need)
            continue
        delta = refilled.tokens_milli - stored.tokens_milli - need - extra
        if moved_milli:
            delta -= moved_milli.get(limit.name, 0)
        deltas[limit.name] = delta
        if need or extra or (moved_milli and moved_milli.get(limit.name)):
            # A reserve is granted only if as much again stays behind.
            floors[limit.name] = extra - delta
    if violations:
        memory = Exhausted(new_rf + wait, new_rf, refilled_all)
        return Rejected(level.entity_id, level.resource, tuple(violations), wait, memory)
    consumed = {name: need for name, need in level.consume_milli.items() if need}
    params = keys.refill_and_consume(
        table,
        key,
        old_refill_ms=bucket.last_refill_ms,
        new_refill_ms=new_rf,
        token_delta_milli=deltas,
        consumed_milli={n: v for n, v in consumed.items() if n not in fresh},
        floor_milli=floors,
        new_limits=fresh,
        configs=configs,
        reset_window=reset_window,
        shard_count=shard_count,
        fenced=fenced,
        hold_milli=granted,
        remove=keys.stale_reserve_attrs(_reserve_attrs(bucket), new_rf) if fenced else (),
        flush=level.flush,
    )
    return WritePlan(params, granted, keys.reserve_epoch(new_rf))


def _refill_can_wait(
    bucket: BucketState,
    level: Level,
    states: Mapping[str, tuple[LimitState, LimitState]],
    now_ms: int,
) -> bool:
    """Whether every limit's stored config is current, its stored tokens cover the
    request, and its refill to `now_ms` would not clamp (fill the shard's room)."""
    for limit in level.limits:
        stored = bucket.limits.get(limit.name)
        if stored is None or (
            stored.capacity_milli,
            stored.refill_amount_milli,
            stored.refill_period_ms,
        ) != (limit.capacity_milli, limit.refill_amount_milli, limit.refill_period_ms):
            return False
        cfg, refilled = states[limit.name]
        need = max(level.consume_milli.get(limit.name, 0), 0)
        if stored.tokens_milli < need:
            return False
        # `refilled` is clamped to the room: it shows the whole gain only when none is lost.
        gain = cfg.refill_gain(bucket.last_refill_ms, now_ms)
        if stored.tokens_milli + gain > refilled.capacity_milli:
            return False
    return True


def _reserve_attrs(bucket: BucketState) -> dict[str, dict[str, str]]:
    """The held counts of a decoded bucket, as item attributes again."""
    return {
        keys.reserve_attr(name, epoch): {"N": str(milli)}
        for name, epochs in bucket.reserved.items()
        for epoch, milli in epochs.items()
    }


def local_rejection(state: RepoState, level: Level, now_ms: int) -> Rejected | None:
    """Reject without a request when a remembered shortage still holds. Never admits."""
    memory = state.exhausted.get((level.entity_id, level.resource))
    if memory is None:
        return None
    if now_ms >= memory.until_ms:
        del state.exhausted[(level.entity_id, level.resource)]
        return None
    violations = []
    wait = 0
    for limit in level.limits:
        seen = memory.limits.get(limit.name)
        if seen is None:
            continue
        predicted = seen.refilled(memory.last_refill_ms, now_ms)
        need = level.consume_milli.get(limit.name, 0)
        if predicted.tokens_milli < need or predicted.tokens_milli < 0:
            ms = max(1, predicted.ms_until(max(need, 0), now_ms, now_ms))
            wait = max(wait, ms)
            violations.append(_status(level, limit.name, seen, predicted.tokens_milli, need, ms))
    if not violations:
        return None
    return Rejected(level.entity_id, level.resource, tuple(violations), wait)


def remember(state: RepoState, level: Level, outcome: Rejected) -> None:
    # One shard's shortage says nothing about its siblings: remember unsharded buckets only.
    if outcome.memory is not None and level.shard_count == 1:
        state.exhausted[(outcome.entity_id, outcome.resource)] = outcome.memory


def learn(state: RepoState, level: Level, attributes: Mapping[str, Any]) -> EntityMeta | None:
    """ALL_NEW carries the entity's immutable facts and the shard count shard 0 knows;
    the entity's record in this client (None when there was nothing to learn from)."""
    if not attributes:
        return None
    # A few attributes, read directly: decoding the whole item costs more than the rest of
    # a write's client-side work.
    count = max(1, keys.get_n(attributes, keys.A_SHARD_COUNT, 1))
    meta = state.learn_entity(
        level.entity_id,
        keys.get_bool(attributes, keys.A_CASCADE),
        keys.get_s(attributes, keys.A_PARENT),
    )
    known = meta.shard_counts.get(level.resource, 1)
    # Shard 0 is the truth; another shard may only raise the count, unless it lies beyond
    # its own count (merged away), which proves the count went down.
    if level.shard_id == 0 or count > known or level.shard_id >= count:
        meta.shard_counts[level.resource] = count
    start = keys.get_n(attributes, keys.A_WINDOW_START, -1)
    meta.windows[(level.resource, level.shard_id)] = start
    if state.exhausted:
        state.exhausted.pop((level.entity_id, level.resource), None)
    return meta


def give_back(state: RepoState, taken: Taken, amounts_milli: Mapping[str, int]) -> Call:
    """A write that changes a taken bucket's consumption by `amounts_milli` (may be negative)."""
    key = keys.bucket_key(state.namespace, taken.entity_id, taken.resource, taken.shard_id)
    return Call("update_item", keys.adjust_tokens(state.table, key, amounts_milli))
