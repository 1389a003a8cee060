"""Token reserves at the limit, on DynamoDB Local (it applies concurrent updates of one
item atomically, as DynamoDB does; moto's server does not).

- 8 processes x 300 acquires on a capacity of 1,000 that never refills, reserves on:
  nothing is created (admitted <= 1,000) and nothing is lost (once every client has
  closed, admitted + the tokens left == 1,000), flat and with cascade.
- Clients sharing a binding limit, on a simulated clock: never ahead of one ideal token
  bucket fed the same arrivals, and close to it.
- A client that closes cleanly loses no reserve.
"""

from __future__ import annotations

import pytest

from benchmarks import reserves_shared as shared
from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Limit, SyncRateLimiter, SyncRepository

pytestmark = pytest.mark.engine

PROCESSES = 8
ATTEMPTS = 300


@pytest.fixture
def table(dynamodb_local: EngineEndpoint) -> str:
    name = unique_name()
    SyncRepository.open(name=name, endpoint_url=dynamodb_local.url, create_table=True).close()
    return name


@pytest.mark.slow
@pytest.mark.parametrize("cascade", [False, True], ids=["flat", "cascade"])
def test_reserves_never_create_or_lose_tokens(
    dynamodb_local: EngineEndpoint, table: str, cascade: bool
) -> None:
    result = shared.exactness(dynamodb_local.url, table, cascade, PROCESSES, ATTEMPTS)
    reserve = result["reserve"]
    # Reserves were really used, or this would only repeat the contention test.
    assert reserve["takes"] > 0 and reserve["hits"] > 0
    assert result["admitted"] <= shared.CAPACITY
    assert result["admitted"] + result["left"] == shared.CAPACITY
    assert result["held_after_close"] == 0
    assert reserve["lost"] == 0
    if cascade:
        # The child (5,000) took one token per admission and got every rejection back.
        assert result["admitted"] + result["child_left"] == 5 * shared.CAPACITY


@pytest.mark.slow
def test_shared_binding_limit_is_never_ahead_of_an_ideal_bucket(
    dynamodb_local: EngineEndpoint, table: str
) -> None:
    result = shared.simulated_under_admission(dynamodb_local.url, table, seconds=5.0)
    assert result["ideal"] < result["arrivals"]  # the limit binds
    assert result["reserve"]["takes"] > 0
    assert result["worst_cumulative_excess"] == 0
    assert result["admitted"] >= 0.98 * result["ideal"]


def test_a_client_that_closes_cleanly_loses_no_reserve(
    dynamodb_local: EngineEndpoint, table: str
) -> None:
    """A busy client on a binding limit: its reserves are taken, spent to the last token
    and written back; none of those writes may fail (a failed return counts as lost)."""
    clock = shared.SimulatedClock()
    with SyncRepository.open(name=table, endpoint_url=dynamodb_local.url) as setup:
        SyncRateLimiter(setup).set_limits("busy", [Limit.custom("rps", 120, 60, 1)], "api")
    repo = SyncRepository.open(name=table, endpoint_url=dynamodb_local.url, clock=clock)
    limiter = SyncRateLimiter(repo)
    for step in range(500):  # 100 acquires/s for 5 s against a refill of 60/s
        clock.now += 10
        if step % 10 == 0:
            repo.return_reserves(everything=False)
        shared.decide(limiter, "busy")
    repo.close()
    stats = repo.get_reserve_stats()
    assert stats.takes > 0
    assert stats.lost == 0
