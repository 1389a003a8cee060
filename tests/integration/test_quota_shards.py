"""A calendar quota on an entity of several shards, at its reset (in-process moto, the
clock injected): every shard shares the window, so the reset reaches every shard, not
only the one a client happens to write first. The window before the boundary admits
at most the quota over all shards; the window after it, exactly the quota."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from tests.conftest import Clock
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository, keys

MIDNIGHT_MS = 1_800_057_600_000  # 2027-01-16 00:00:00 UTC (the test clock: 2027-01-15)
DAILY = Limit.quota("daily", 40, reset="0 0 * * *", tz="UTC")
SHARDS = 4


@pytest.fixture
def limiter(table_name: str) -> Iterator[tuple[SyncRateLimiter, Clock]]:
    clock = Clock(MIDNIGHT_MS - 60_000)
    with mock_aws():
        repo = SyncRepository.open(name=table_name, create_table=True, clock=clock, reserve=False)
        limiter = SyncRateLimiter(repo)
        limiter.set_limits("e", [DAILY], resource="api")
        with limiter.acquire("e", "api", {"daily": 1}):
            pass
        shard0 = keys.bucket_key(repo.state.namespace, "e", "api", 0)
        params = keys.double_shards(table_name, shard0, 1, SHARDS, clock.now_ms, clock.now_ms)
        boto3.client("dynamodb", region_name="us-east-1").update_item(**params)
        yield (
            SyncRateLimiter(SyncRepository.open(name=table_name, clock=clock, reserve=False)),
            clock,
        )
        repo.close()


def drain(limiter: SyncRateLimiter) -> int:
    """Acquire until 40 refusals in a row (an acquire tries one shard or two, so a
    refusal alone does not mean every shard is spent); how many were admitted."""
    admitted = refused = 0
    while refused < 40:
        try:
            with limiter.acquire("e", "api", {"daily": 1}):
                admitted += 1
            refused = 0
        except RateLimitExceeded:
            refused += 1
    return admitted


def test_every_shard_of_a_calendar_quota_resets(
    limiter: tuple[SyncRateLimiter, Clock],
) -> None:
    client, clock = limiter
    # At most the quota before (a split that raced this window's takes may leave a few
    # tokens on the table: under, never over).
    assert 1 + drain(client) <= 40
    assert len(client.get_shards("e", "api")) == SHARDS, "every shard was written"
    clock.now_ms = MIDNIGHT_MS
    # A client that writes one shard first: the others reset too, with no write of theirs.
    with client.acquire("e", "api", {"daily": 1}):
        pass
    assert client.available("e", "api") == {"daily": 39}
    assert 1 + drain(client) == 40, "the window after: exactly the quota again"
