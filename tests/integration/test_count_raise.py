"""A count raise on shard 0 over a shard no acquire has made yet, on in-process moto.

After 1 -> 2 shards, shard 1's share stays in shard 0's split snapshot (`sf`) until its
first acquire makes it. A raise to 4 takes a new snapshot; should shard 0 have been given
back more than it took since the first (its full-at time earlier than the snapshot), the
new snapshot would hand that give-back to the unmade shard a second time (the
simulator's seed 8069: the aggregator's doubling, 10 tokens offered where an ideal
bucket held 7.5). The raise keeps the snapshot from going back (`keys.snapshot_kept`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Clock
from tests.integration.test_aggregator import _shard_item, _shard_items, _with_snapshot
from zae_limiter import Limit, SyncRateLimiter, SyncRepository, keys
from zae_limiter.aggregator import shards as aggregator_shards
from zae_limiter.aggregator.plan import AggregatorConfig

LIMIT = Limit.per_minute("rpm", 600)


@pytest.fixture
def limiter(table_name: str, clock: Clock) -> Iterator[SyncRateLimiter]:
    from moto import mock_aws

    with mock_aws():
        repo = SyncRepository.open(name=table_name, create_table=True, clock=clock)
        yield SyncRateLimiter(repo)
        repo.close()


def _doubled_once(limiter: SyncRateLimiter, table_name: str, now: int) -> Any:
    """Shard 0 of `hot`/`api` at 2 shards, shard 1 unmade: shard 0's own half holds 100
    tokens, the unmade half (its snapshot) 200. The table offers 300."""
    client = limiter.repository._runner.client
    limiter.set_limits("hot", [LIMIT], resource="api")
    item = _with_snapshot(_shard_item(0, 2, 100_000, now), 2, 200_000, now)
    item[keys.A_SHARD_DOUBLED] = keys.n(now - 3_600_000)
    client.put_item(TableName=table_name, Item=item)
    assert limiter.available("hot", "api", limits=[LIMIT]) == {"rpm": 300}
    return client


def _raise_to_4(limiter: SyncRateLimiter, table_name: str, now: int) -> bool:
    """The aggregator's doubling write (`aggregator.shards._double`), 2 -> 4: applied?"""
    config = AggregatorConfig(table=table_name)
    write = aggregator_shards._double(
        ("default", "hot", "api"), 2, config, now, now - 1, ("1",), ["rpm"]
    )
    client = limiter.repository._runner.client
    try:
        client.update_item(**write.call.params)
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def _give_back(client: Any, table_name: str, milli: int) -> None:
    """`milli` back to shard 0 at 2 shards (negative: a take), as a rollback writes it."""
    key = keys.bucket_key("default", "hot", "api", 0)
    moved = milli * LIMIT.refill_period_ms * 2  # full-at units per millitoken at 2 shards
    client.update_item(**keys.give_back_write(table_name, key, {"rpm": moved}, {"rpm": -milli}))


def test_a_raise_never_hands_a_give_back_to_an_unmade_shard(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    now = clock.now_ms
    client = _doubled_once(limiter, table_name, now)
    _give_back(client, table_name, 150_000)  # shard 0's half: 100 -> 250 (its capacity: 300)
    assert limiter.available("hot", "api", limits=[LIMIT]) == {"rpm": 450}
    _raise_to_4(limiter, table_name, now)
    # Whatever the raise did, shard 1's share still holds 200, not shard 0's 250.
    assert limiter.available("hot", "api", limits=[LIMIT]) == {"rpm": 450}


def test_a_raise_after_takes_snapshots_what_the_donor_holds(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """The usual case (shard 0 took since the last raise): the raise goes through, and
    the unmade shard 1 loses what shard 0 took since, for itself; nothing is created."""
    now = clock.now_ms
    client = _doubled_once(limiter, table_name, now)
    _give_back(client, table_name, -60_000)  # a take of 60: shard 0's half 100 -> 40
    assert _raise_to_4(limiter, table_name, now)
    item = _shard_items(limiter, "hot", "api", 4)[0]
    assert keys.get_n(item, keys.A_SHARD_COUNT) == 4
    # Four quarters at shard 0's 40 (a half): 20 each. Lost: shard 1's 200 - 40.
    assert limiter.available("hot", "api", limits=[LIMIT]) == {"rpm": 80}
