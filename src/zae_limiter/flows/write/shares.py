"""A shard's share of a limit: what it holds now, as writes and reads count it.

A shard holds 1/`shard_count` of a limit's capacity and rate (bucket.py takes the count
as an argument), less what token reserves hold of it. A stored limit whose config no
longer matches the application's (or a schema-v2 `tk`) is read as the tokens it held
under what it stored, brought to the current config: what the next write rebases to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from zae_limiter import keys
from zae_limiter.bucket import LimitState, legacy_tokens
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState


@lru_cache(maxsize=1024)
def stored_config(limit: Limit) -> LimitState:
    """The undivided config a bucket item stores for a limit (a full bucket)."""
    return LimitState(
        capacity_milli=limit.capacity_milli,
        refill_amount_milli=limit.refill_amount_milli,
        refill_period_ms=limit.refill_period_ms,
        window=limit.window,
    )


def config_of(state: LimitState) -> tuple[int, int, int]:
    return state.capacity_milli, state.refill_amount_milli, state.refill_period_ms


def current(bucket: BucketState, limit: Limit, now_ms: int) -> tuple[LimitState, int, bool]:
    """(the limit under its current config with the shard's full-at time, the millitokens
    its room lacks for reserves (held, or lost with a crashed client), whether the item
    must be rebased to that config first)."""
    cfg = stored_config(limit)
    reserved = bucket.reserved.get(limit.name, {})
    # Expired held counts are spent tokens until a write charges them (keys/reserves.py).
    held = keys.held_milli(reserved, now_ms) + keys.lost_milli(reserved, now_ms) if reserved else 0
    stored = bucket.limits.get(limit.name)
    count = bucket.shard_count
    if stored is None:
        return cfg, held, True
    legacy = bucket.legacy_tokens.get(limit.name)
    if legacy is not None:
        tokens = legacy_tokens(stored, legacy, bucket.last_refill_ms, now_ms, count, held)
    elif (  # config_of(stored) != config_of(cfg), spelled out: asked on every write
        stored.capacity_milli != cfg.capacity_milli
        or stored.refill_amount_milli != cfg.refill_amount_milli
        or stored.refill_period_ms != cfg.refill_period_ms
    ):
        at = switched_at(stored, limit, now_ms, count)
        tokens = stored.tokens(at, count, held)
        return _at(cfg, cfg.with_tokens(tokens, at, count, held)), held, True
    else:
        return _at(cfg, stored.full_at), held, False
    return _at(cfg, cfg.with_tokens(tokens, now_ms, count, held)), held, True


def switched_at(stored: LimitState, limit: Limit, now_ms: int, count: int) -> int:
    """When the stored numbers stopped being the limit's: a scheduled limit's boundary
    (`since_ms`), so the old numbers refill up to it and the new ones from it, as an ideal
    bucket whose numbers change at that instant would. Else `now_ms` (a change stored by
    an operator: its time is not known). A stored state already in debt at the boundary
    was written after it (a client whose clock is behind, still on the old numbers, or
    one ahead that switched back): it is rebased at `now_ms`, off by at most that skew."""
    since = limit.since_ms
    if since is None or since > now_ms or stored.tokens(since, count) < 0:
        return now_ms
    return since


def _at(cfg: LimitState, full_at: int | None) -> LimitState:
    # Built directly: `dataclasses.replace` costs several times as much, once per limit
    # of every acquire.
    return LimitState(
        capacity_milli=cfg.capacity_milli,
        refill_amount_milli=cfg.refill_amount_milli,
        refill_period_ms=cfg.refill_period_ms,
        full_at=full_at,
        window=cfg.window,
    )


def tokens_now(bucket: BucketState, limit: Limit, now_ms: int, shares: int = 1) -> int:
    """Millitokens the shard holds for `limit` at `now_ms`, for the `shares` of the limit
    it holds (reads: shares of shards not created yet are still in it, see
    `shares_held`). Tokens held in reserves are not there for anyone else."""
    state, held, _ = current(bucket, limit, now_ms)
    count = bucket.shard_count
    own = state.tokens(now_ms, count)
    if shares == 1:
        return own - held
    # The shares not split off yet hold what the split will copy: the snapshot.
    given = replace(state, full_at=split_full_at(bucket, limit, now_ms))
    return own + (shares - 1) * given.tokens(now_ms, count) - held


def split_full_at(bucket: BucketState, limit: Limit, now_ms: int) -> int | None:
    """The full-at value a shard split off `bucket` starts from: the snapshot the last
    count raise took (keys.snapshot_parts), in the limit's current config
    (`rebased_split`), else (none taken) the current one."""
    state, _, rebase = current(bucket, limit, now_ms)
    snapshot = bucket.split_full_at.get(limit.name)
    if snapshot is None or limit.name in bucket.legacy_tokens:
        return state.full_at
    return rebased_split(bucket, limit, now_ms) if rebase else snapshot


def rebased_split(bucket: BucketState, limit: Limit, now_ms: int) -> int | None:
    """The item's split snapshot brought to `limit`'s config; None when it has none, or
    stores that config already.

    A snapshot is a full-at value, in the units of the numbers the item stored when its
    count rose (`ra`). Read under other numbers it stands for other tokens: a write that
    rebases the item rebases its snapshot with it (keys/takes.py, REBASE), keeping the
    tokens the shares not split off yet hold, as `current` keeps the shard's own. (Left
    as it was, a snapshot of a 192-token limit read as one of 497 made a new shard full:
    the fault simulator's seed 4330, tokens created.)"""
    snapshot = bucket.split_full_at.get(limit.name)
    stored = bucket.limits.get(limit.name)
    if snapshot is None or stored is None or limit.name in bucket.legacy_tokens:
        return None
    cfg = stored_config(limit)
    if config_of(stored) == config_of(cfg):
        return None
    count = bucket.shard_count
    at = switched_at(stored, limit, now_ms, count)
    # No reserve is held of a share not split off yet: its room is the whole share.
    tokens = _at(stored, snapshot).tokens(at, count)
    return cfg.with_tokens(tokens, at, count)


def capacity_of(limit: Limit, shard_count: int, shares: int = 1) -> int:
    return shares * stored_config(limit).room(shard_count)


def donor_of(shard_id: int) -> int:
    """The shard a new shard `shard_id` >= 1 splits its share off: its sibling before the
    doubling that made it (shard k - n after n -> 2n shards)."""
    return shard_id - (1 << (shard_id.bit_length() - 1))


def shares_held(shards: Sequence[BucketState]) -> dict[int, int]:
    """How many of shard 0's shares (1 / its count) each shard read holds. After a
    doubling, a shard is made by its first acquire, which copies its donor's full-at
    times (or shard 0's when the donor was never made either); until then that share is
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
            # Its snapshot predates the raise still to come, which takes a new one.
            bucket = replace(bucket, shard_count=count, split_full_at={})
        counted.append((bucket, shares))
    return counted
