"""Read-only views of buckets: available tokens, time until available, shards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.errors import ValidationError
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.acquire import validate_amounts
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.config import require_limits, resolve
from zae_limiter.flows.write.shares import read_shares, stored_config, tokens_now
from zae_limiter.limits import Limit, in_force, validate_limits
from zae_limiter.models import BucketState


def read_shards(state: RepoState, entity_id: str, resource: str) -> Flow[list[BucketState]]:
    """Shard 0, then (if it says there are more) the others in one BatchGetItem."""
    ns = state.namespace
    first_key = keys.bucket_key(ns, entity_id, resource, 0)
    first = yield from one(Call("get_item", keys.get_consistent(state.table, first_key)))
    if not first.item:
        return []
    shard0 = keys.decode_bucket(first.item)
    if shard0.shard_count <= 1:
        return [shard0]
    wanted = [keys.bucket_key(ns, entity_id, resource, i) for i in range(1, shard0.shard_count)]
    found = yield from batch_get(state, wanted)
    others = [keys.decode_bucket(item) for item in found.values()]
    return [shard0, *sorted(others, key=lambda b: b.shard_id)]


def _limits(
    state: RepoState, entity_id: str, resource: str, limits: Sequence[Limit] | None, now_ms: int
) -> Flow[tuple[Limit, ...]]:
    keys.validate_id("entity_id", entity_id)
    keys.validate_resource(resource)
    if limits is not None:
        return in_force(validate_limits(limits), now_ms)
    resolved = yield from resolve(state, [(entity_id, resource)], now_ms)
    return require_limits(resolved[(entity_id, resource)], entity_id, resource).limits


def _session_state(limit: Limit, shard: BucketState, now_ms: int) -> LimitState:
    stored = shard.limits.get(limit.name)
    return replace(stored_config(limit), full_at=None if stored is None else stored.full_at)


def _tokens_now(limit: Limit, shards: Sequence[BucketState], now_ms: int) -> tuple[int, LimitState]:
    """Millitokens across shards at `now_ms`, and the limit as one combined bucket.

    Tokens held in reserves are not available to anyone else (docs/reserves.md).
    """
    whole = stored_config(limit)
    if not shards:
        return limit.capacity_milli, whole
    total = sum(tokens_now(shard, limit, now_ms, shares) for shard, shares in read_shares(shards))
    return total, whole


def available(
    state: RepoState, entity_id: str, resource: str, limits: Sequence[Limit] | None, now_ms: int
) -> Flow[dict[str, int]]:
    resolved = yield from _limits(state, entity_id, resource, limits, now_ms)
    shards = yield from read_shards(state, entity_id, resource)
    return {limit.name: _tokens_now(limit, shards, now_ms)[0] // 1000 for limit in resolved}


def time_until_available(
    state: RepoState,
    entity_id: str,
    resource: str,
    needed: Mapping[str, int],
    limits: Sequence[Limit] | None,
    now_ms: int,
) -> Flow[float]:
    amounts = validate_amounts("needed", needed)
    resolved = yield from _limits(state, entity_id, resource, limits, now_ms)
    by_name = {limit.name: limit for limit in resolved}
    unknown = sorted(set(amounts) - set(by_name))
    if unknown:
        raise ValidationError(f"needed names limits that are not configured: {unknown}")
    shards = yield from read_shards(state, entity_id, resource)
    wait = 0
    for name, milli in amounts.items():
        tokens, whole = _tokens_now(by_name[name], shards, now_ms)
        if milli > whole.capacity_milli:
            raise ValidationError(
                f"needed[{name!r}] = {milli // 1000} exceeds the capacity {by_name[name].capacity}"
            )
        # The shards together, as one bucket holding `tokens` now. A session quota's
        # session is shard 0's (flows/scaling/sessions.py): the wait runs to its end.
        session = by_name[name].window is not None and whole.window and whole.window.session_ms
        if session and shards and tokens < milli:
            end = _session_state(by_name[name], shards[0], now_ms).reset_at(now_ms)
            wait = max(wait, 0 if end is None else max(1, end - now_ms))
            continue
        together = replace(whole, full_at=whole.with_tokens(tokens, now_ms))
        wait = max(wait, together.ms_until(milli, now_ms))
    return wait / 1000
