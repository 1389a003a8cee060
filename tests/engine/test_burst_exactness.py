"""Issue 22's burst at the top of the bucket, on DynamoDB Local (a smoke test; the full
burst and property suites live with the benchmarks).

A limit of capacity 10 refilling 10 per second; one acquire, 3 s idle (full again), then
40 acquires 1 ms apart, on an injected clock: admitted must match an ideal token bucket
fed the same arrival times (it was 19 of 11 before full-at times), sync and async,
reserves on and off, per second and per minute.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction

import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.conftest import Clock
from zae_limiter import (
    Limit,
    RateLimiter,
    RateLimitExceeded,
    Repository,
    SyncRateLimiter,
    SyncRepository,
)

pytestmark = pytest.mark.engine

LIMITS = {
    "second": Limit.custom("rps", 10, 10, 1),
    "minute": Limit.custom("rpm", 100, 100, 60),
}


def ideal(arrivals: list[int], limit: Limit) -> int:
    """What one continuous token bucket, full before the first arrival, admits."""
    rate = Fraction(limit.refill_amount, limit.refill_period_seconds * 1000)
    tokens, last, admitted = Fraction(limit.capacity), arrivals[0], 0
    for at in arrivals:
        tokens = min(Fraction(limit.capacity), tokens + (at - last) * rate)
        last = at
        if tokens >= 1:
            tokens -= 1
            admitted += 1
    return admitted


def arrivals(limit: Limit) -> list[int]:
    idle = 3000 if limit.refill_period_seconds == 1 else 180_000  # full again
    start = 1_800_000_000_000
    burst = 4 * limit.capacity
    return [start] + [start + idle + i for i in range(burst)]


def sync_burst(url: str, limit: Limit, reserve: bool) -> int:
    clock = Clock()
    name = unique_name()
    repo = SyncRepository.open(
        name=name, endpoint_url=url, create_table=True, clock=clock, reserve=reserve
    )
    limiter = SyncRateLimiter(repo)
    admitted = 0
    try:
        for at in arrivals(limit):
            clock.now_ms = at
            try:
                with limiter.acquire("k", "api", {limit.name: 1}, limits=[limit]):
                    admitted += 1
            except RateLimitExceeded:
                pass
    finally:
        repo.close()
    return admitted


async def async_burst(url: str, limit: Limit, reserve: bool) -> int:
    clock = Clock()
    repo = await Repository.open(
        name=unique_name(), endpoint_url=url, create_table=True, clock=clock, reserve=reserve
    )
    limiter = RateLimiter(repo)
    admitted = 0
    try:
        for at in arrivals(limit):
            clock.now_ms = at
            try:
                async with limiter.acquire("k", "api", {limit.name: 1}, limits=[limit]):
                    admitted += 1
            except RateLimitExceeded:
                pass
    finally:
        await repo.close()
    return admitted


@pytest.mark.parametrize("period", list(LIMITS))
@pytest.mark.parametrize("reserve", [False, True], ids=["reserve-off", "reserve-on"])
@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_bucket_that_sat_full_admits_what_an_ideal_bucket_admits(
    dynamodb_local: EngineEndpoint, period: str, reserve: bool, face: str
) -> None:
    limit = LIMITS[period]
    if face == "sync":
        admitted = sync_burst(dynamodb_local.url, limit, reserve)
    else:
        admitted = asyncio.run(async_burst(dynamodb_local.url, limit, reserve))
    expected = ideal(arrivals(limit), limit)
    print(f"{face} {period} reserve={reserve}: admitted {admitted}, ideal {expected}")
    assert admitted <= expected + 1
    # and reserves never leave a bucket that sat full short by more than their share
    assert admitted >= expected - limit.capacity // 2
