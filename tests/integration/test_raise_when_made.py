"""A count is raised only once every shard below it is made (flows/scaling/made.py), on
moto: the fault simulator's seed 10367 as a directed schedule.

Two shards; shard 1 never made, so its share sits in shard 0's split snapshot. Shard 0
then holds more than that snapshot (a give-back, or a take planned before the doubling
that the snapshot already counts). A raise to four shards now would overwrite the
snapshot: shard 1, made later, and shard 3 made from it would each copy shard 0's state
instead of shard 1's share (tokens created).
"""

from __future__ import annotations

from typing import Any

from tests.conftest import Clock
from tests.integration import test_aggregator as aggregator
from zae_limiter import Limit, SyncRateLimiter, keys
from zae_limiter.aggregator import shards as shards_module
from zae_limiter.aggregator.apply import execute
from zae_limiter.aggregator.plan import AggregatorConfig, StreamPlan

#: The moto-backed limiter of the aggregator's tests.
limiter = aggregator.limiter

LIMIT = Limit.per_minute("rpm", 600)


def _count(limiter: SyncRateLimiter) -> int:
    items = aggregator._shard_items(limiter, "hot", "api", 1)
    return int(keys.get_n(items[0], keys.A_SHARD_COUNT))


def _raise(limiter: SyncRateLimiter, table_name: str, count: int, now: int) -> Any:
    """The aggregator's raise of `count`, as a batch that proves the partition hot plans
    it, executed as the Lambda and the poller do."""
    config = AggregatorConfig(table=table_name)
    write = shards_module._double(
        ("default", "hot", "api"), count, config, now, now - 10_000, ("1",), ["rpm"]
    )
    return limiter.repository.run(execute(StreamPlan(writes=[write]), config, now))


def test_no_raise_over_a_shard_not_made_yet(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    limiter.set_limits("hot", [LIMIT], resource="api")
    client = limiter.repository._runner.client
    now = clock.now_ms
    # Shard 0 of two: 100 tokens of its own; shard 1, unmade, 20 in shard 0's snapshot.
    shard0 = aggregator._with_snapshot(aggregator._shard_item(0, 2, 100_000, now), 2, 20_000, now)
    client.put_item(TableName=table_name, Item=shard0)
    before = limiter.available("hot", "api", limits=[LIMIT])
    assert before == {"rpm": 120}
    assert _raise(limiter, table_name, 2, now) == []
    assert _count(limiter) == 2  # not raised: shard 1 is not made
    assert limiter.available("hot", "api", limits=[LIMIT]) == before
    # Shard 1 made (from the snapshot, as its first acquire makes it): the raise goes.
    client.put_item(TableName=table_name, Item=aggregator._shard_item(1, 2, 20_000, now))
    assert _raise(limiter, table_name, 2, now) == []
    assert _count(limiter) == 4
    assert limiter.available("hot", "api", limits=[LIMIT]) == before
    # The shards acquires make from here hold no more than the table offered (a reserve
    # taken meanwhile holds some of it, and a split rounds in the limiter's favour).
    for _ in range(40):
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=[LIMIT]):
            pass
    assert len(aggregator._shard_items(limiter, "hot", "api", 4)) > 2
    assert limiter.available("hot", "api", limits=[LIMIT])["rpm"] <= 120 - 40
