"""What a skew between clients' clocks can cost (docs/buckets.md, "Clock skew").

Each client writes with its own clock. One that runs `d` ms ahead sees the bucket `d` ms
further refilled, so two clients whose clocks differ by `d` can together admit at most
`d x rate` tokens more than one bucket would, and never more than one capacity more. On
DynamoDB Local, two clients on simulated clocks (one `d` ms ahead) burst on a bucket that
sat idle until full; what they admit together is held to the capacity, the refill over the burst and
`d x rate`. Two orders: alternating acquires, and the one where the skew costs most (the
client behind drains the bucket, then the one ahead finds it `d` ms further refilled).
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


def _burst(url: str, skew_ms: int, reserve: bool, order: str) -> tuple[int, int]:
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
        # Each client writes once: during the burst it plans from that image, which says
        # "full" by then (the SET form, whose `fa <= now` guards a stale image).
        for limiter in limiters:
            with limiter.acquire("skewed", "api", {"rps": 1}, limits=[LIMIT]):
                pass
        true_ms += 5_000  # idle: full again, whichever clock reads it
        start, admitted = true_ms, 0
        for i in range(ATTEMPTS):
            behind.now, ahead.now = true_ms, true_ms + skew_ms
            limiter = limiters[_client(order, i)]
            try:
                with limiter.acquire("skewed", "api", {"rps": 1}, limits=[LIMIT]):
                    admitted += 1
            except RateLimitExceeded:
                pass
            true_ms += STEP_MS
        return admitted, true_ms - start
    finally:
        for repo in repos:
            repo.close()


def _client(order: str, attempt: int) -> int:
    """Which client (0 behind, 1 ahead) makes attempt `attempt`."""
    if order == "alternating":
        return attempt % 2
    return 0 if attempt < ATTEMPTS // 2 else 1  # "behind-first"


@pytest.mark.parametrize("order", ["alternating", "behind-first"])
@pytest.mark.parametrize("reserve", [False, True], ids=["no-reserve", "reserve"])
@pytest.mark.parametrize("skew_ms", [0, 300, 1000])
def test_a_skew_of_d_ms_costs_at_most_d_times_the_rate(
    dynamodb_local: EngineEndpoint, skew_ms: int, reserve: bool, order: str
) -> None:
    admitted, burst_ms = _burst(dynamodb_local.url, skew_ms, reserve, order)
    per_ms = LIMIT.refill_amount / (LIMIT.refill_period_seconds * 1000)
    refill = int(burst_ms * per_ms)
    # A client ahead sees at most a full bucket, however far ahead it runs.
    skew_cost = min(int(skew_ms * per_ms), LIMIT.capacity)
    assert admitted >= LIMIT.capacity  # the burst met a full bucket
    assert admitted <= LIMIT.capacity + refill + skew_cost, (
        f"admitted {admitted}, past the capacity {LIMIT.capacity} + refill {refill}"
        f" + skew cost {skew_cost}"
    )
