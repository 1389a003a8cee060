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
from zae_limiter.flows.write.shares import tokens_now

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


def _raise(repo_namespace: str, table_name: str, old: int, new: int, now_ms: int) -> None:
    """Raise shard 0's count as the library's doubling does: its full-at value
    snapshotted for the shards split off it later."""
    shard0 = keys.bucket_key(repo_namespace, "e", "api", 0)
    params = keys.double_shards(table_name, shard0, old, new, now_ms, now_ms, ["daily"])
    boto3.client("dynamodb", region_name="us-east-1").update_item(**params)


def _seeded(repo: SyncRepository, stream: int) -> SyncRepository:
    """The repository's shard choices drawn from a fixed seed: which shard each take lands
    on decides whether a donor has a fraction to settle, so the schedule (and what its
    mutants show, tests/mutants/test_quota_mutants.py) is the same on every run."""
    repo.state.rng.seed(f"0/{stream}")
    repo.state.jitter.seed(f"0/{stream}/jitter")
    return repo


@pytest.mark.parametrize("path", ["1-to-4", "1-to-2-to-4"])
def test_a_split_quota_admits_exactly_its_allowance(table_name: str, path: str) -> None:
    """Split after an odd number of takes, each shard lacks a fraction of a token that
    no acquire of whole tokens reaches: the fractions go to shard 0, where they add up
    to whole tokens, so the window admits exactly the quota over all shards. Through a
    donor other than shard 0 too (1 -> 2 -> 4: shard 3 splits off shard 1)."""
    clock = Clock(MIDNIGHT_MS - 60_000)
    with mock_aws():
        repo = _seeded(
            SyncRepository.open(name=table_name, create_table=True, clock=clock, reserve=False), 1
        )
        limiter = SyncRateLimiter(repo)
        limiter.set_limits("e", [DAILY], resource="api")
        with limiter.acquire("e", "api", {"daily": 1}):
            pass
        taken = 1
        namespace = repo.state.namespace
        if path == "1-to-4":
            _raise(namespace, table_name, 1, SHARDS, clock.now_ms)
        else:
            _raise(namespace, table_name, 1, 2, clock.now_ms)
            while len(limiter.get_shards("e", "api")) < 2:  # shard 1, split at 2 shards
                with limiter.acquire("e", "api", {"daily": 1}):
                    taken += 1
            if taken % 2 == 0:  # an odd number taken at 2 shards: halves again at 4
                with limiter.acquire("e", "api", {"daily": 1}):
                    taken += 1
            _raise(namespace, table_name, 2, SHARDS, clock.now_ms)
        client = SyncRateLimiter(
            _seeded(SyncRepository.open(name=table_name, clock=clock, reserve=False), 2)
        )
        assert taken + drain(client) == 40
        assert len(client.get_shards("e", "api")) == SHARDS, "every shard was made"
        # Nothing left in any shard, not even a fraction: none stranded, none created.
        assert _left_milli(table_name, namespace, clock.now_ms) == 0
        repo.close()


def _left_milli(table_name: str, namespace: str, now_ms: int) -> int:
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    left = 0
    for shard in range(SHARDS):
        key = keys.bucket_key(namespace, "e", "api", shard)
        item = dynamodb.get_item(TableName=table_name, Key=key, ConsistentRead=True)["Item"]
        left += tokens_now(keys.decode_bucket(item), DAILY, now_ms)
    return left
