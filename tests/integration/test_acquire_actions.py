"""The acquire-only IAM policy names exactly the DynamoDB actions the acquire paths use.

Every path of an application's client is driven here (open, first acquire, speculative
success, fallback, rejection, cascade, read-then-write, adjust, rollback, shard doubling
and creation, available), the calls are collected from the capacity meter, and their
actions must equal `infra.options.ACQUIRE_ACTIONS`: a new call in a flow fails this test
until the policy grants it, and a grant nothing uses fails it too.
"""

from __future__ import annotations

import pytest
from moto import mock_aws

from tests.conftest import Clock
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.flows.records.table import ensure_table
from zae_limiter.flows.records.version import check_version
from zae_limiter.infra.options import ACQUIRE_ACTIONS

LIMITS = [Limit.per_minute("rpm", 100)]


def action(op: str) -> str:
    return "dynamodb:" + "".join(part.title() for part in op.split("_"))


def test_acquire_policy_matches_the_calls_the_library_makes(clock: Clock) -> None:
    with mock_aws():
        admin = SyncRateLimiter(SyncRepository.open(name="policy", create_table=True))
        admin.create_entity("proj")
        admin.create_entity("key", parent_id="proj", cascade=True)
        admin.set_resource_defaults("api", LIMITS)
        repo = SyncRepository.open(name="policy", clock=clock, partition_wcu=10)
        ops: set[str] = set()
        with repo.meter.measure() as opened:  # what open() runs
            repo.run(ensure_table(repo.state, create=False))
            repo.run(check_version(repo.state))
        ops.update(opened.ops)
        limiter = SyncRateLimiter(repo)
        slow = SyncRateLimiter(repo, speculative_writes=False)
        with repo.meter.measure() as m:
            for _ in range(3):
                with limiter.acquire("key", "api", {"rpm": 1}) as lease:
                    lease.adjust(rpm=1)
            with pytest.raises(ValueError), limiter.acquire("key", "api", {"rpm": 1}):
                raise ValueError("rolled back")
            with slow.acquire("key", "api", {"rpm": 1}):
                pass
            for _ in range(12):  # hot: the shard count doubles and shard 1 is created
                with limiter.acquire("hot", "api", {"rpm": 1}, limits=LIMITS):
                    pass
            with pytest.raises(RateLimitExceeded):
                with limiter.acquire("hot", "api", {"rpm": 99}, limits=LIMITS):
                    pass
            limiter.available("key", "api")
            limiter.time_until_available("key", "api", {"rpm": 5})
        ops.update(m.ops)
        assert repo.get_cache_stats().misses > 0
        assert sorted({action(op) for op in ops}) == sorted(ACQUIRE_ACTIONS)
