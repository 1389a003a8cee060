"""A calendar quota whose last tokens are spread over shards in fractions (issue 39), on
in-process moto with the clock injected: a take that every shard tried refuses reads all
the shards and, when together they cover it, moves what one shard lacks onto it in one
transaction, then takes there (flows/scaling/gather.py). The window admits exactly its
quota, and the table holds what it held less what was admitted."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from tests.conftest import Clock
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository, keys
from zae_limiter.flows.write.shares import tokens_now

MIDNIGHT_MS = 1_800_057_600_000  # 2027-01-16 00:00:00 UTC
SHARDS = 4


def _sharded(table_name: str, clock: Clock, quota: Limit, first: int) -> SyncRepository:
    """An entity whose first take (`first` tokens) was on one shard, raised to SHARDS as
    the library's doubling raises a count; a second client, which knows nothing."""
    repo = SyncRepository.open(name=table_name, create_table=True, clock=clock, reserve=False)
    limiter = SyncRateLimiter(repo)
    limiter.set_limits("e", [quota], resource="api")
    with limiter.acquire("e", "api", {quota.name: first}):
        pass
    shard0 = keys.bucket_key(repo.state.namespace, "e", "api", 0)
    params = keys.double_shards(
        table_name, shard0, 1, SHARDS, clock.now_ms, clock.now_ms, [quota.name]
    )
    boto3.client("dynamodb", region_name="us-east-1").update_item(**params)
    repo.close()
    return SyncRepository.open(name=table_name, clock=clock, reserve=False)


def _drain(limiter: SyncRateLimiter, name: str) -> int:
    """Acquire one token until 20 refusals in a row; how many were admitted."""
    admitted = refused = 0
    while refused < 20:
        try:
            with limiter.acquire("e", "api", {name: 1}):
                admitted += 1
            refused = 0
        except RateLimitExceeded:
            refused += 1
    return admitted


@pytest.fixture
def clock() -> Iterator[Clock]:
    with mock_aws():
        yield Clock(MIDNIGHT_MS - 3_600_000)


@pytest.mark.parametrize(
    ("amount", "first"),
    [
        (10, 1),  # 2.5 tokens a shard: half a token left on each after two takes
        (14, 3),  # 3.5 a shard, and a split of an odd deficit: quarters as well
        (1000, 1),  # the quota: 250 a shard
    ],
    ids=["2.5-a-shard", "3.5-a-shard-odd-split", "1000"],
)
def test_a_quota_spread_in_fractions_admits_exactly_its_allowance(
    table_name: str, clock: Clock, amount: int, first: int
) -> None:
    quota = Limit.quota("daily", amount, reset="0 0 * * *", tz="UTC")
    repo = _sharded(table_name, clock, quota, first)
    limiter = SyncRateLimiter(repo)
    assert first + _drain(limiter, "daily") == amount
    shards = [keys.decode_bucket(item) for item in _items(repo)]
    assert len(shards) == SHARDS, "every shard was made"
    left = sum(tokens_now(b, quota, clock.now_ms) for b in shards)
    assert 0 <= left < 1000, f"{left} millitokens left over the shards: nothing created"
    # A client that remembers nothing finds nothing either.
    fresh = SyncRateLimiter(SyncRepository.open(name=table_name, clock=clock, reserve=False))
    with pytest.raises(RateLimitExceeded) as refused:
        with fresh.acquire("e", "api", {"daily": 1}):
            pass
    assert refused.value.retry_after_seconds == 3600, "until the reset"
    repo.close()


def _items(repo: SyncRepository) -> list[dict[str, object]]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    ns = repo.state.namespace
    out = []
    for shard in range(SHARDS):
        key = keys.bucket_key(ns, "e", "api", shard)
        item = client.get_item(TableName=repo.state.table, Key=key, ConsistentRead=True)
        if "Item" in item:
            out.append(item["Item"])
    return out
