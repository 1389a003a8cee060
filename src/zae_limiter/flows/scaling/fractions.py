"""A quota's fractions of a token, kept on shard 0 when a shard splits.

A split halves what a shard lacks (flows/scaling/split.py): a shard short of an odd
number of tokens leaves half a token on the donor and half on the new shard. An acquire
takes whole tokens, so neither half is ever spent: a quota of 1,000 on 4 shards, split
after its first take, admitted 996 at most (986 to 994 measured, with the snapshot
missing as well). A refilling limit's halves come back with the refill; a quota's come
back only at the reset, so for a quota the fraction is moved: shard 0 is
charged it (a bounded take: never into debt), then the shard that had it gets it back,
whole again. Every split sends its fractions to shard 0, and together they are whole
tokens (the shares of a whole quota, less whole takes), so shard 0 ends whole too.

Each step only ever takes: a charge that fails moves nothing, and a give-back that does
not land (its answer lost, the window gone) leaves the fraction taken twice, never
created. A session quota's fraction moves only while shard 0 holds the session the
shard is in (flows/scaling/sessions.py): a fraction of an ended session is gone anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling import sessions
from zae_limiter.flows.write.charge import charge_write
from zae_limiter.flows.write.levels import Level, Rejected
from zae_limiter.flows.write.plan import plan_write
from zae_limiter.flows.write.shares import current, stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

MILLI = 1000
#: Lost races on shard 0 before a move gives up (the fraction then stays where it is).
MAX_MOVE_ATTEMPTS = 4


def fractions_of(
    limits: tuple[Limit, ...], full_at: Mapping[str, int | None], count: int, now_ms: int
) -> dict[str, int]:
    """Per quota, the millitokens (1..999) a shard of `count` whose full-at values are
    `full_at` lacks beyond whole tokens."""
    out = {}
    for limit in limits:
        at = full_at.get(limit.name)
        if limit.window is None or at is None:
            continue
        state = replace(stored_config(limit), full_at=at)
        part = state.deficit(now_ms, count) % MILLI
        if part:
            out[limit.name] = part
    return out


def rounded(
    limits: tuple[Limit, ...],
    full_at: Mapping[str, int | None],
    moved: Mapping[str, int],
    count: int,
) -> dict[str, int | None]:
    """`full_at` less the fractions `moved` away (the shard then lacks whole tokens)."""
    out = dict(full_at)
    for limit in limits:
        at, part = full_at.get(limit.name), moved.get(limit.name, 0)
        if at is not None and part:
            out[limit.name] = at - part * stored_config(limit).unit(count)
    return out


def session_starts(
    limits: tuple[Limit, ...], full_at: Mapping[str, int | None]
) -> dict[str, int]:
    """Per session quota, the start of the session the full-at values `full_at` are in."""
    return {
        limit.name: at // stored_config(limit).refill_amount_milli
        for limit in limits
        if sessions.is_session(limit) and (at := full_at.get(limit.name)) is not None
    }


def charge_shard0(
    state: RepoState,
    level: Level,
    parts: Mapping[str, int],
    now_ms: int,
    starts: Mapping[str, int],
) -> Flow[bool]:
    """Take `parts` (millitokens per limit) from shard 0, bounded like any take; whether
    it was taken. Refused (shard 0 lacks them) or unanswered, nothing is moved. A session
    quota's fraction moves only inside the session it is of (`starts`): into another,
    it would be a token of one session spent in the next."""
    limits = tuple(limit for limit in level.limits if limit.name in parts)
    zero = replace(
        level, limits=limits, consume_milli=dict(parts), shard_id=0, hold_milli={}, flush=None
    )
    key = keys.bucket_key(state.namespace, level.entity_id, level.resource, 0)
    try:
        read = yield from one(Call("get_item", keys.get_consistent(state.table, key)))
        item = read.item
        for _ in range(MAX_MOVE_ATTEMPTS):
            if not item:
                return False
            bucket = keys.decode_bucket(item)
            if not _in_sessions(bucket, limits, starts, now_ms):
                return False
            plan = plan_write(bucket, replace(zero, shard_count=bucket.shard_count), now_ms,
                              state.table, key, reset_window=False)  # fmt: skip
            if isinstance(plan, Rejected):
                return False
            result = yield from one(Call("update_item", plan.params))
            if result.ok:
                return True
            item = result.old
    except RateLimiterUnavailable:
        return False  # throttled, or its answer lost: counted as not taken
    return False


def _in_sessions(
    bucket: BucketState, limits: tuple[Limit, ...], starts: Mapping[str, int], now_ms: int
) -> bool:
    return all(
        sessions.open_start(bucket, limit, now_ms) == starts.get(limit.name)
        for limit in limits
        if sessions.is_session(limit)
    )


def give_back(
    state: RepoState,
    level: Level,
    shard_id: int,
    parts: Mapping[str, int],
    seen: Mapping[str, object],
    now_ms: int,
) -> Flow[None]:
    """Give `parts` back to `shard_id` (as `seen`), into the window they were taken in
    only; sent once (a lost answer leaves them taken)."""
    bucket = keys.decode_bucket(seen)
    limits = [limit for limit in level.limits if limit.name in parts]
    windows = {limit.name: _window(bucket, limit, now_ms) for limit in limits}
    delta = {name: -part for name, part in parts.items()}
    where = (level.entity_id, level.resource, shard_id)
    call = charge_write(state, where, limits, delta, now_ms, seen, windows=windows)
    try:
        yield from one(call)
    except RateLimiterUnavailable:
        return


def settle_donor(
    state: RepoState, level: Level, donor_id: int, after: Mapping[str, object], now_ms: int
) -> Flow[None]:
    """A donor whose count this client just raised (`after`, its ALL_NEW): its calendar
    quotas' fractions go to shard 0."""
    donor = keys.decode_bucket(after)
    full_at = {
        limit.name: current(donor, limit, now_ms)[0].full_at
        for limit in level.limits
        if limit.name in donor.limits
    }
    parts = fractions_of(level.limits, full_at, donor.shard_count, now_ms)
    starts = session_starts(level.limits, full_at)
    if parts and (yield from charge_shard0(state, level, parts, now_ms, starts)):
        yield from give_back(state, level, donor_id, parts, after, now_ms)


def _window(bucket: BucketState, limit: Limit, now_ms: int) -> int:
    state: LimitState = current(bucket, limit, now_ms)[0]
    return state.base(now_ms)
