"""Discovering an entity's bucket shards (GSI3 keys, then BatchGetItem)."""

from __future__ import annotations

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows import Flow
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.entities import entity_bucket_keys
from zae_limiter.flows.write.shares import capacity_of, read_shares, tokens_now
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState, ShardInfo


def list_resources(state: RepoState, entity_id: str) -> Flow[list[str]]:
    """Resources the entity has buckets for."""
    keys.validate_id("entity_id", entity_id)
    found = yield from entity_bucket_keys(state, entity_id)
    return sorted({keys.parse_bucket_pk(k[keys.PK]["S"])[2] for k in found})


def limit_of(name: str, stored: LimitState) -> Limit:
    """The limit a shard's stored numbers describe (shown without reading the config)."""
    capacity = max(1, stored.capacity_milli // 1000)
    if stored.window is not None:
        return Limit(name, capacity, 0, 0, window=stored.window)
    ra, rp = stored.refill_amount_milli // 1000, stored.refill_period_ms // 1000
    return Limit(name, capacity, max(1, ra), max(1, rp))


def quota_resets(bucket: BucketState, now_ms: int) -> dict[str, int]:
    """Per quota of the shard: when its current window ends (ms; a session quota with
    no session open is left out)."""
    ends = {name: stored.reset_at(now_ms) for name, stored in bucket.user_limits.items()}
    return {name: end for name, end in ends.items() if end is not None}


def shard_info(
    bucket: BucketState,
    now_ms: int,
    item_rate: float,
    counted: tuple[BucketState, int],
) -> ShardInfo:
    """One shard as shown: the count it records, and the capacity and tokens of the
    shares it holds, `counted` as reads count them (`shares.read_shares`)."""
    measured, shares = counted
    capacity: dict[str, int] = {}
    tokens: dict[str, int] = {}
    reserved: dict[str, int] = {}
    for name, stored in bucket.user_limits.items():
        limit = limit_of(name, stored)
        held = keys.held_milli(bucket.reserved.get(name, {}), now_ms)
        capacity[name] = capacity_of(limit, measured.shard_count, shares) // 1000
        tokens[name] = tokens_now(measured, limit, now_ms, shares) // 1000
        if held:
            reserved[name] = held // 1000
    return ShardInfo(
        entity_id=bucket.entity_id,
        resource=bucket.resource,
        shard_id=bucket.shard_id,
        shard_count=bucket.shard_count,
        capacity=capacity,
        tokens=tokens,
        write_pressure_pct=round(100 * item_rate / max(1, bucket.partition_wcu), 1),
        full_in_ms=max((s.full_in_ms(now_ms) for s in bucket.user_limits.values()), default=0),
        reserved=reserved,
        resets_at_ms=quota_resets(bucket, now_ms),
    )


def get_shards(
    state: RepoState, entity_id: str, resource: str, now_ms: int
) -> Flow[list[ShardInfo]]:
    keys.validate_id("entity_id", entity_id)
    keys.validate_resource(resource)
    found = yield from entity_bucket_keys(state, entity_id, resource)
    items = list((yield from batch_get(state, found)).values())
    buckets = [keys.decode_bucket(item) for item in items]
    infos = [
        shard_info(bucket, now_ms, keys.write_rate(item, now_ms), counted)
        for bucket, item, counted in zip(buckets, items, read_shares(buckets), strict=True)
    ]
    return sorted(infos, key=lambda info: info.shard_id)
