"""Planning one bucket write from an image of the item: what to write, or why not.

No requests are made here; `flows.write.take` runs the state machine that uses these plans.
The image is what DynamoDB last showed (an ALL_OLD, a read) or, for a first try, what
this client's own last write left (ALL_NEW, possibly stale: the conditions guard it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows.context import Exhausted
from zae_limiter.flows.write import grants
from zae_limiter.flows.write.levels import Level, Rejected, WritePlan
from zae_limiter.flows.write.shares import config_of, current, rebased_split, stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState, LimitStatus

#: `keys.reserve_epoch` is `now_ms // RESERVE_EPOCH_MS`: spelled out where every write
#: asks it, a call less each time.
_EPOCH_MS = keys.RESERVE_EPOCH_MS


def enforces(limit: Limit) -> bool:
    """A limit that rejects what it cannot hold; a soft one (Limit.soft) takes anyway,
    its bucket going below zero, and only reports (docs/quotas.md, "Soft limits")."""
    return not limit.soft


def new_bucket(
    level: Level,
    now_ms: int,
    partition_wcu: int,
    full_at: Mapping[str, int | None] | None = None,
) -> BucketState:
    """A bucket as first written: full with the first take applied (shard 0), or with the
    full-at times of the shard it splits off (`full_at`), the first take applied on top."""
    limits = {}
    count = level.shard_count
    for limit in level.limits:
        cfg = stored_config(limit)
        if full_at is not None:
            cfg = LimitState(**{**_config_fields(cfg), "full_at": full_at.get(limit.name)})
        need = level.consume_milli.get(limit.name, 0)
        at = cfg.charged(need, now_ms, count)
        if not need and limit.window is not None and cfg.is_full(now_ms):
            # Nothing taken: a split shard keeps its donor's values, so it opens no
            # session of its own (flows/scaling/sessions.py).
            at = cfg.full_at if cfg.full_at is not None else at
        limits[limit.name] = LimitState(
            **_config_fields(cfg), total_consumed_milli=need, full_at=at
        )
    return BucketState(
        entity_id=level.entity_id,
        resource=level.resource,
        shard_id=level.shard_id,
        shard_count=count,
        last_refill_ms=0,
        limits=limits,
        cascade=level.cascade,
        parent_id=level.parent_id,
        partition_wcu=partition_wcu,
    )


def _config_fields(state: LimitState) -> dict[str, Any]:
    return {
        "capacity_milli": state.capacity_milli,
        "refill_amount_milli": state.refill_amount_milli,
        "refill_period_ms": state.refill_period_ms,
        "window": state.window,
    }


def _status(
    level: Level, limit: Limit, count: int, tokens: int, need: int, wait: int, resets: int | None
) -> LimitStatus:
    return LimitStatus(
        entity_id=level.entity_id,
        resource=level.resource,
        limit_name=limit.name,
        capacity=stored_config(limit).room(count) // 1000,
        available=tokens // 1000,
        requested=-(-need // 1000),
        retry_after_seconds=wait / 1000,
        kind="rate" if limit.window is None else "quota",
        resets_at_ms=resets,
    )


def plan_write(
    bucket: BucketState,
    level: Level,
    now_ms: int,
    table: str,
    key: keys.Item,
    reset_window: bool = True,
    confirmed: bool = True,
    failed_writes: int = 0,
    since_ms: int | None = None,
    expiry: tuple[int | None] | None = None,
) -> WritePlan | Rejected:
    """Take `level.consume_milli` (and a reserve, and report a flush) at `now_ms`.

    A `confirmed` image is what DynamoDB showed: a shortage in it is a rejection. An
    unconfirmed one (this client's memory) never rejects: the write's conditions do.
    `failed_writes`: conditional writes of this take that failed on the item; the write
    counts them in the partition's write-rate window with itself. `since_ms`: when the
    image was taken (default: now); the write's condition names the held count of every
    reserve epoch that may have been raised since (`watched_epochs`). `expiry`: the
    item's new `ttl` (keys/takes.py `take_write`).
    """
    count = bucket.shard_count
    epoch = now_ms // _EPOCH_MS  # `keys.reserve_epoch`, inline (as below): every write
    # Loops, not comprehensions: each of those is a call of its own, on every write.
    states = {}
    tokens = {}
    for limit in level.limits:
        seen = states[limit.name] = current(bucket, limit, now_ms)
        tokens[limit.name] = seen[0].tokens(now_ms, count, seen[1])
    granted = grants.granted(level, tokens) if level.hold_milli else {}
    violations: list[LimitStatus] = []
    wait = 0
    for limit in level.limits:
        state, held, _rebase = states[limit.name]
        need = level.consume_milli.get(limit.name, 0)
        have = tokens[limit.name]
        if confirmed and enforces(limit) and (have < need or have < 0):
            ms = state.ms_until(max(need, 0), now_ms, count, held)
            # More than this shard can ever hold: come back after a full refill period,
            # by when the count may have changed (never a tight retry loop).
            never = grants.never_wait(state, need, count, now_ms)
            ms = max(1, never) if ms < 0 else max(1, ms)
            wait = max(wait, ms)
            resets = None if state.window is None else state.reset_at(now_ms)
            violations.append(_status(level, limit, count, have, need, ms, resets))
    if violations:
        memory = Exhausted(
            grants.remembered_until(states, violations, now_ms, wait),
            {name: st for name, (st, _h, _r) in states.items()},
            {name: held for name, (_s, held, _r) in states.items()},
        )
        return Rejected(level.entity_id, level.resource, tuple(violations), wait, memory)
    held_adds = keys.held_deltas(granted, epoch, level.flush) if granted or level.flush else {}
    # Expired counts of crashed reserves move into the full-at times (exactly as seen).
    expired = _expired(bucket, level, held_adds, now_ms) if bucket.reserved else {}
    if expired:
        held_adds.update({attr: -count for attr, count in expired.items()})
    watched = watched_epochs(now_ms if since_ms is None else since_ms, now_ms)
    writes = []
    for limit in level.limits:
        moves = (granted, held_adds, expired)
        write = _limit_write(
            bucket, limit, states[limit.name], now_ms, level, moves, confirmed, watched
        )
        if write is not None:
            writes.append(write)
    remove = _stale(bucket, now_ms) if confirmed and bucket.reserved else []
    legacy = bucket.last_refill_ms if bucket.legacy_tokens else None
    params = keys.take_write(
        table,
        key,
        writes,
        shard_count=count,
        now_ms=now_ms,
        reset_window=reset_window,
        held_adds=held_adds,
        held_exact=expired,
        remove=[a for a in remove if a not in held_adds] if confirmed else (),
        legacy_rf=legacy if confirmed else None,
        writes_counted=1 + failed_writes,
        expiry=expiry,
    )
    return WritePlan(params, granted, epoch if granted else 0)


def _expired(
    bucket: BucketState, level: Level, held_adds: Mapping[str, int], now_ms: int
) -> dict[str, int]:
    """Expired held counts the write charges (those it does not move otherwise)."""
    return {
        attr: count
        for limit in level.limits
        for attr, count in keys.expired_counts(
            limit.name, bucket.reserved.get(limit.name, {}), now_ms
        ).items()
        if attr not in held_adds
    }


def watched_epochs(since_ms: int, now_ms: int) -> range:
    """The reserve epochs whose held counts a write planned at `now_ms` from an image
    taken at `since_ms` names in its condition, newest first.

    Any count raised after the image is in one of them: a reserve is raised in its
    writer's current epoch, and a write lands within an epoch of being planned (the
    epoch before the image's covers a raise that was in flight then; the one after now
    covers this write's own flight, and a writer whose clock runs ahead). A count from
    an older epoch was there when the image was taken, and the image shows it. So a
    count raised since, and expired since (it then counts as spent, keys/reserves.py),
    cannot escape the write's bound: the stale-image over-admission of issue 35."""
    current = now_ms // _EPOCH_MS
    oldest = min(current, since_ms // _EPOCH_MS) - 1
    return range(current + 1, oldest - 1, -1)


def _limit_write(
    bucket: BucketState,
    limit: Limit,
    seen: tuple[LimitState, int, bool],
    now_ms: int,
    level: Level,
    moves: tuple[Mapping[str, int], Mapping[str, int], Mapping[str, int]],
    confirmed: bool,
    watched: range,
) -> keys.LimitWrite | None:
    """One limit's form (see keys/takes.py) and its numbers. `moves`: the reserve granted,
    the held counts the write moves, and those among them it charges exactly."""
    granted, held_adds, charged_exactly = moves
    state, held, rebase = seen
    name, count = limit.name, bucket.shard_count
    need = level.consume_milli.get(name, 0)
    reserve = granted.get(name, 0)
    epoch = now_ms // _EPOCH_MS
    reserved = bucket.reserved.get(name, {})
    lost = keys.expired_counts(name, reserved, now_ms) if reserved else {}
    flush = level.flush
    spent = flush.spent.get(name, 0) if flush else 0
    # A reserve's spending from a quota window that has ended since: usage only, never
    # charged to the window this write lands in (flows/reserves/book.py `Reserve.gone`).
    uncounted = spent if flush and name in flush.uncharged else 0
    charge = need + spent - uncounted
    if lost:
        charge += sum(count for attr, count in lost.items() if held_adds.get(attr) == -count)
    # What the write does to the counts the room lacks (held and lost reserves).
    moved = _moved(name, epoch, lost, held_adds) if held_adds else 0
    # What must stay behind: nothing below zero, and as much again as a reserve takes.
    spare = state.room(count, held) - moved - reserve
    # `now * ra` for a refilling limit; a quota's window clock (bucket.py): the write's
    # conditions then name the window it was planned in.
    now_ra, base = state.threshold(now_ms), state.base(now_ms)
    start = level.joined.get(name)
    if start is not None and state.is_full(now_ms):
        # A shard k >= 1 with no session open joins shard 0's (flows/scaling/sessions.py).
        base = start * state.refill_amount_milli
    unit = state.unit(count)
    # config_of(state), inline: every limit of every write
    config = (state.capacity_milli, state.refill_amount_milli, state.refill_period_ms)
    watching: Sequence[int] = watched
    if charged_exactly:
        watching = [e for e in watched if keys.reserve_attr(name, e) not in charged_exactly]
    if rebase and confirmed:
        exact = tuple((e, reserved.get(e, 0)) for e in watching)
        write = _rebase(bucket, name, state, charge, now_ms, count, exact)
        return with_split(write, bucket, limit, now_ms)
    # Reserves other clients take meanwhile raise this epoch's held count and fail the
    # condition. Half of what the write leaves over is headroom for them: the bound
    # assumes it taken, the condition allows it. Near empty, there is none: exact.
    left = state.tokens(now_ms, count, held) - moved - reserve - charge
    slack = max(0, left // 2)
    spare -= slack
    seen_held = []
    for e in watching:
        seen_held.append((e, reserved.get(e, 0) + (slack if e == epoch else 0)))
    known = tuple(seen_held)
    # A soft limit takes without a bound (its bucket may go below zero) and checks
    # nothing; a reserve taken from it is bounded like any other (tokens leave first).
    bounded = reserve > 0 or (need > 0 and enforces(limit))
    if not bounded and charge == 0 and not uncounted:
        if not enforces(limit):
            return None
        return keys.LimitWrite(
            name, keys.CHECK, now_ra, bound=base + spare * unit, held=known, config=config
        )
    if state.is_full(now_ms) and not (bounded and spare < charge):
        form, amount = keys.SET, base + charge * unit
    else:
        # Short of full, or a take that even a full room would not cover (an image not
        # confirmed: the bound then fails the write, and ALL_OLD decides).
        form, amount = keys.ADD, charge * unit
    return keys.LimitWrite(
        name,
        form,
        now_ra,
        amount=amount,
        bound=base + (spare - charge) * unit if bounded else None,
        consumed=charge + uncounted,
        held=known if bounded else (),
        config=config,
    )


def _moved(name: str, epoch: int, lost: Mapping[str, int], held_adds: Mapping[str, int]) -> int:
    """What a write's held-count moves change of the counts its room lacks: this epoch's
    and the last one's (held), and the expired ones (lost)."""
    counted = {keys.reserve_attr(name, e) for e in (epoch, epoch - 1)}
    counted.update(lost)
    return sum(milli for attr, milli in held_adds.items() if attr in counted)


def _rebase(
    bucket: BucketState,
    name: str,
    state: LimitState,
    charge: int,
    now_ms: int,
    count: int,
    known: tuple[tuple[int, int], ...],
) -> keys.LimitWrite:
    """SET the current config and the full-at time that keeps the tokens read (less the
    take), under exactly what was read: another write in between fails it."""
    stored = bucket.limits.get(name)
    return keys.LimitWrite(
        name,
        keys.REBASE,
        state.threshold(now_ms),
        amount=state.charged(charge, now_ms, count),
        consumed=charge,
        held=known,
        config=config_of(state),
        old_full_at=None if stored is None else stored.full_at,
        old_config=None if stored is None else config_of(stored),
        old_tokens=bucket.legacy_tokens.get(name),
    )


def with_split(
    write: keys.LimitWrite, bucket: BucketState, limit: Limit, now_ms: int
) -> keys.LimitWrite:
    """A REBASE that also brings the item's split snapshot to the new config, under the
    snapshot read (`rebased_split`): the shards not made yet copy it later, under the
    config the item then stores."""
    split = rebased_split(bucket, limit, now_ms)
    if split is None:
        return write
    return replace(write, split=split, old_split=bucket.split_full_at[limit.name])


def _stale(bucket: BucketState, now_ms: int) -> list[str]:
    """Held counts older than any reader or converter looks at, holding nothing (a
    positive one is a crashed client's, charged first: keys.expired_counts)."""
    oldest = keys.reserve_epoch(now_ms) - 2
    return [
        keys.reserve_attr(name, epoch)
        for name, epochs in bucket.reserved.items()
        for epoch, value in epochs.items()
        if epoch < oldest and value <= 0
    ]


# ---------------------------------------------------------------- the item's expiry
# When an idle bucket item may expire: the `ttl` each write gives it (keys/expiry.py).
#
# A bucket that is full and holds no reserves is the same as no item: the first acquire
# after it is gone creates it full, as it would have found it. So a write gives its item a
# `ttl` past the latest time at which the bucket it leaves can still be short of full,
# plus the idle period configured (`bucket_ttl`, per level like limits, default a day):
#
# - a refilling limit: a write leaves at most its capacity missing (its condition keeps
#   the tokens at or above zero), so it is full again one whole refill later; a charge
#   that may leave debt (an adjustment after the fact) adds the time its amount refills;
# - a calendar quota: full when its window ends (an expired quota bucket would be a
#   reset: it must stay until then); a session quota: when a session opened now would end;
# - a reserve taken by the write may be spent from memory for up to its two epochs, so
#   the bucket must outlive that too (a holder of a reserve whose bucket was deleted and
#   created again would spend tokens the new bucket also has).
#
# A bucket of more than one shard never expires (`None`: the write removes its `ttl`), and
# every write that raises a shard count removes it: a shard's share is only right next to
# its siblings', and a shard 0 recreated at count 1 beside a live shard 1, or a shard 1
# split again from its donor, would hold tokens twice.
#
# Usage counters lose nothing to expiry: the aggregator reads consumption from the table's
# stream (each write's `tc` delta, kept 24 h whatever happens to the item), and a stream
# REMOVE carries none (aggregator/records.py).

#: How long after its write a reserve may still be spent: its epoch and the next, and the
#: epoch the write was planned in (keys/reserves.py).
RESERVE_HORIZON_MS = 3 * keys.RESERVE_EPOCH_MS


def full_again_ms(limit: Limit, now_ms: int, debt_milli: int = 0) -> int:
    """The latest time at which a bucket of `limit` written at `now_ms` is full again."""
    window = limit.window
    if window is not None:
        if window.cron is not None:
            return window.bounds(now_ms)[1]
        return now_ms + (window.session_ms or 0)
    milli = limit.capacity_milli + max(0, debt_milli)
    # ceil(milli / rate) with the rate in millitokens per ms: whole periods of refill
    return now_ms + -(-milli * limit.refill_period_ms // limit.refill_amount_milli)


@lru_cache(maxsize=1024)
def _refill_span_ms(
    limits: tuple[Limit, ...], full_again: Callable[[Limit, int], int]
) -> int | None:
    """How long after any write the bucket of these refilling limits is full again at the
    latest (reserves included); None when one of them is a quota (its window decides).
    `full_again` is `full_again_ms`, part of the key: a replaced one is asked again."""
    span = RESERVE_HORIZON_MS
    for limit in limits:
        if limit.window is not None:
            return None
        span = max(span, full_again(limit, 0))
    return span


def expires_at_s(
    limits: Iterable[Limit],
    shard_count: int,
    now_ms: int,
    idle_s: int | None,
    debt_milli: Mapping[str, int] | None = None,
) -> int | None:
    """The `ttl` (epoch seconds) a write at `now_ms` gives its bucket item; None: the
    item must carry none (sharded, or a level that set 0: never expire)."""
    if not idle_s or shard_count > 1:
        return None
    if not debt_milli and isinstance(limits, tuple):
        # An acquire's take: for refilling limits the horizon is `now` plus a span known
        # per set of limits (full_again_ms is `now` plus a constant for each).
        span = _refill_span_ms(limits, full_again_ms)
        if span is not None:
            return -(-(now_ms + span) // 1000) + idle_s
    debt = debt_milli or {}
    horizon = now_ms + RESERVE_HORIZON_MS
    for limit in limits:
        horizon = max(horizon, full_again_ms(limit, now_ms, debt.get(limit.name, 0)))
    return -(-horizon // 1000) + idle_s
