"""The arithmetic of one bucket write: what to write, or why the request is rejected.

No requests are made here; `flows.take` runs the state machine that uses these plans.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows import Call
from zae_limiter.flows.context import Exhausted, RepoState
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


@dataclass(frozen=True, slots=True)
class Taken:
    entity_id: str
    resource: str
    shard_id: int
    consumed_milli: Mapping[str, int]
    limits: tuple[Limit, ...]


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
    """Refill every limit to `now_ms` and consume; a plan to write, or a rejection."""
    new_rf = max(bucket.last_refill_ms, now_ms)
    # Unfenced when nothing refills and no config changes: then the write is a plain
    # conditional ADD that concurrent writers cannot invalidate.
    fenced = shard_count is not None or bool(moved_milli)
    deltas: dict[str, int] = {}
    floors: dict[str, int] = {}
    fresh: dict[str, LimitState] = {}
    configs: dict[str, LimitState] = {}
    violations: list[LimitStatus] = []
    refilled_all: dict[str, LimitState] = {}
    wait = 0
    for limit in level.limits:
        cfg = effective(limit, bucket.shard_count)
        configs[limit.name] = stored_config(limit)
        need = level.consume_milli.get(limit.name, 0)
        stored = bucket.limits.get(limit.name)
        current = LimitState(
            cfg.capacity_milli if stored is None else stored.tokens_milli,
            cfg.capacity_milli,
            cfg.refill_amount_milli,
            cfg.refill_period_ms,
        )
        refilled = current.refilled(bucket.last_refill_ms, new_rf) if stored else current
        if (
            stored is None
            or refilled.tokens_milli != stored.tokens_milli
            or (stored.capacity_milli, stored.refill_amount_milli, stored.refill_period_ms)
            != (
                limit.capacity_milli,
                limit.refill_amount_milli,
                limit.refill_period_ms,
            )
        ):
            fenced = True
        refilled_all[limit.name] = refilled
        if refilled.tokens_milli < need or refilled.tokens_milli < 0:
            ms = refilled.ms_until(max(need, 0), new_rf, new_rf)
            # More than this shard can ever hold: come back after a full refill period,
            # by when the count may have changed (never a tight retry loop).
            ms = cfg.refill_period_ms if ms < 0 else max(1, ms)
            wait = max(wait, ms)
            violations.append(_status(level, limit.name, cfg, refilled.tokens_milli, need, ms))
            continue
        if stored is None:
            fresh[limit.name] = LimitState(refilled.tokens_milli - need, 0, 0, 1, need)
            continue
        delta = refilled.tokens_milli - stored.tokens_milli - need
        if moved_milli:
            delta -= moved_milli.get(limit.name, 0)
        deltas[limit.name] = delta
        if need or (moved_milli and moved_milli.get(limit.name)):
            floors[limit.name] = -delta
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
    )
    return WritePlan(params)


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


def learn(state: RepoState, level: Level, attributes: Mapping[str, Any]) -> None:
    """ALL_NEW carries the entity's immutable facts and the shard count shard 0 knows."""
    if not attributes:
        return
    bucket = keys.decode_bucket(attributes)
    meta = state.learn_entity(level.entity_id, bucket.cascade, bucket.parent_id)
    known = meta.shard_counts.get(level.resource, 1)
    # Shard 0 is the truth; another shard may only raise the count, unless it lies beyond
    # its own count (merged away), which proves the count went down.
    if level.shard_id == 0 or bucket.shard_count > known or level.shard_id >= bucket.shard_count:
        meta.shard_counts[level.resource] = bucket.shard_count
    meta.windows[(level.resource, level.shard_id)] = bucket.window_start_ms
    state.exhausted.pop((level.entity_id, level.resource), None)


def give_back(state: RepoState, taken: Taken, amounts_milli: Mapping[str, int]) -> Call:
    """A write that changes a taken bucket's consumption by `amounts_milli` (may be negative)."""
    key = keys.bucket_key(state.namespace, taken.entity_id, taken.resource, taken.shard_id)
    return Call("update_item", keys.adjust_tokens(state.table, key, amounts_milli))
