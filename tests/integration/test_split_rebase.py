"""A limit changed on a sharded entity whose shard 1 is not made yet, on moto: the fault
simulator's seed 4330 as a directed schedule.

Shard 0 of two stores the old numbers (192 tokens a minute); shard 1's share sits in
shard 0's split snapshot (`sf`), a full-at value in the old numbers' units (`ra`). A
client with the new numbers (497) rebases shard 0; unless the snapshot is rebased with
it, the next client reads it as a full-at value of the new numbers (here: long past,
so full), and shard 1, made from it, starts with a full share (tokens created). A client
that reads the item before anyone rebased it must read the snapshot's tokens too, not
shard 0's own (`flows/write/shares.py`, `rebased_split`).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from tests.conftest import Clock
from tests.integration import test_aggregator as aggregator
from zae_limiter import Limit, SyncRateLimiter, keys
from zae_limiter.bucket import LimitState
from zae_limiter.models import BucketState

#: The moto-backed limiter of the aggregator's tests.
limiter = aggregator.limiter

OLD = Limit.per_minute("tpm", 192)
NEW = Limit.per_minute("tpm", 497)


class _LastShard(random.Random):
    """Every shard choice falls on the last shard (a random pick, made deterministic)."""

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return int(args[-1] if len(args) == 1 else args[1]) - 1


def _shard0(own: int, snapshot: int, now: int) -> dict[str, Any]:
    """Shard 0 of two under OLD: `own` millitokens of its own, `snapshot` in the split
    snapshot that shard 1 (not made) will copy."""
    cfg = LimitState(capacity_milli=192_000, refill_amount_milli=192_000, refill_period_ms=60_000)
    state = replace(cfg, full_at=cfg.with_tokens(own, now, 2))
    item = keys.new_bucket_item("default", BucketState("hot", "api", 0, 2, 0, {"tpm": state}), now)
    item[keys.limit_attr("tpm", "sf")] = keys.n(cfg.with_tokens(snapshot, now, 2))
    return item


def _snapshot_tokens(item: dict[str, Any], now: int) -> int:
    """What shard 0's split snapshot holds under the numbers the item stores."""
    bucket = keys.decode_bucket(item)
    stored = bucket.limits["tpm"]
    return replace(stored, full_at=bucket.split_full_at["tpm"]).tokens(now, bucket.shard_count)


def _available(limiter: SyncRateLimiter, limit: Limit) -> int:
    return int(limiter.available("hot", "api", limits=[limit])["tpm"])


def test_a_rebase_keeps_what_the_split_snapshot_holds(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    rebase_then_split(limiter, clock)


def rebase_then_split(limiter: SyncRateLimiter, clock: Clock) -> None:
    """The schedule, on the table `limiter` serves (moto here, DynamoDB Local in
    tests/engine/test_split_rebase_engine.py)."""
    limiter.set_limits("hot", [NEW], resource="api")
    client = limiter.repository._runner.client
    now = clock.now_ms
    client.put_item(TableName=limiter.repository.table_name, Item=_shard0(90_000, 10_000, now))
    assert _available(limiter, OLD) == 100
    # Read under the new numbers, each share keeps its tokens (shard 1's: the snapshot's).
    assert _available(limiter, NEW) == 100
    # A new client knows one shard: its first write goes to shard 0 and rebases it.
    with limiter.acquire("hot", "api", {"tpm": 1}, limits=[NEW]):
        pass
    items = aggregator._shard_items(limiter, "hot", "api", 2)
    assert sorted(items) == [0]
    assert keys.decode_bucket(items[0]).limits["tpm"].capacity_milli == 497_000
    # The snapshot was rebased with it: still the 10 tokens shard 1's share holds.
    assert _snapshot_tokens(items[0], now) == 10_000
    assert _available(limiter, NEW) <= 99
    # Shard 1 made from it holds those 10 (less its first take), not a full share.
    limiter.repository.state.rng = _LastShard()
    with limiter.acquire("hot", "api", {"tpm": 1}, limits=[NEW]):
        pass
    items = aggregator._shard_items(limiter, "hot", "api", 2)
    shard1 = keys.decode_bucket(items[1])
    assert shard1.limits["tpm"].tokens(now, 2) <= 9_000
    assert _available(limiter, NEW) <= 98
