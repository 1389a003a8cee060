"""What a skew between clients' clocks can cost (docs/buckets.md, "Clock skew").

Each client writes with its own clock. One that runs `d` ms ahead sees the bucket `d` ms
further refilled, so two clients whose clocks differ by `d` can together admit at most
`d x rate` tokens more than one bucket would: never a second capacity. On DynamoDB Local,
two clients on simulated clocks (one `d` ms ahead) burst on a bucket that sat idle until
full, alternating acquires; what they admit together is held to the capacity, the refill
over the burst and `d x rate`.
"""

from __future__ import annotations

import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.exactness_model import SimClock
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository

pytestmark = pytest.mark.engine

LIMIT = Limit.per_second("rps", 10)  # capacity 10, 10 per second
ATTEMPTS = 40
STEP_MS = 2


def _burst(url: str, skew_ms: int, reserve: bool) -> tuple[int, int]:
    """(admitted, burst length in true ms) of two clients, the second `skew_ms` ahead."""
    table = unique_name()
    SyncRepository.open(name=table, endpoint_url=url, create_table=True).close()
    true_ms = 1_800_000_000_000
    behind, ahead = SimClock(true_ms), SimClock(true_ms + skew_ms)
    repos = [
        SyncRepository.open(name=table, endpoint_url=url, clock=clock, reserve=reserve)
        for clock in (behind, ahead)
    ]
    try:
        limiters = [SyncRateLimiter(repo) for repo in repos]
        with limiters[0].acquire("skewed", "api", {"rps": 1}, limits=[LIMIT]):
            pass
        true_ms += 5_000  # idle: full again, whichever clock reads it
        start, admitted = true_ms, 0
        for i in range(ATTEMPTS):
            behind.now, ahead.now = true_ms, true_ms + skew_ms
            try:
                with limiters[i % 2].acquire("skewed", "api", {"rps": 1}, limits=[LIMIT]):
                    admitted += 1
            except RateLimitExceeded:
                pass
            true_ms += STEP_MS
        return admitted, true_ms - start
    finally:
        for repo in repos:
            repo.close()


@pytest.mark.parametrize("reserve", [False, True], ids=["no-reserve", "reserve"])
@pytest.mark.parametrize("skew_ms", [0, 300, 1000])
def test_a_skew_of_d_ms_costs_at_most_d_times_the_rate(
    dynamodb_local: EngineEndpoint, skew_ms: int, reserve: bool
) -> None:
    admitted, burst_ms = _burst(dynamodb_local.url, skew_ms, reserve)
    per_ms = LIMIT.refill_amount / (LIMIT.refill_period_seconds * 1000)
    refill = int(burst_ms * per_ms)
    skew_cost = int(skew_ms * per_ms)
    assert admitted >= LIMIT.capacity  # the burst met a full bucket
    assert admitted <= LIMIT.capacity + refill + skew_cost, (admitted, refill, skew_cost)
    # Never a second capacity, whatever the skew here.
    assert admitted < 2 * LIMIT.capacity + refill
