"""Play a burst scenario against this library through its public API, on a simulated
clock, sync or async: one client, one entity, the limit passed with each acquire."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tests.exactness_model import Arrival, SimClock
from zae_limiter import (
    Limit,
    RateLimiter,
    RateLimitExceeded,
    Repository,
    SyncRateLimiter,
    SyncRepository,
)

RESOURCE = "api"
ENTITY = "burst-key"


def start_ms() -> int:
    # Simulated time starts at the wall clock: the table's other timestamps stay plausible.
    return time.time_ns() // 1_000_000


def play_sync(
    url: str, table: str, limit: Limit, plan: Sequence[Arrival], reserve: bool
) -> list[tuple[int, bool]]:
    clock = SimClock(start_ms())
    origin = clock.now
    seen = []
    with SyncRepository.open(name=table, endpoint_url=url, clock=clock, reserve=reserve) as repo:
        limiter = SyncRateLimiter(repo)
        for arrival in plan:
            clock.now = origin + arrival.offset_ms
            try:
                with limiter.acquire(
                    ENTITY, RESOURCE, {limit.name: arrival.amount}, limits=[limit]
                ):
                    seen.append((clock.now, True))
            except RateLimitExceeded:
                seen.append((clock.now, False))
    return seen


async def play_async(
    url: str, table: str, limit: Limit, plan: Sequence[Arrival], reserve: bool
) -> list[tuple[int, bool]]:
    clock = SimClock(start_ms())
    origin = clock.now
    seen = []
    repo = await Repository.open(name=table, endpoint_url=url, clock=clock, reserve=reserve)
    async with repo:
        limiter = RateLimiter(repo)
        for arrival in plan:
            clock.now = origin + arrival.offset_ms
            consume = {limit.name: arrival.amount}
            try:
                async with limiter.acquire(ENTITY, RESOURCE, consume, limits=[limit]):
                    seen.append((clock.now, True))
            except RateLimitExceeded:
                seen.append((clock.now, False))
    return seen


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def burst_worker(
    url: str, table: str, limit: Limit, attempts: int, reserve: bool, ready: Any, results: Any
) -> None:
    """One process of a shared burst, in real time: connect, wait for the others, then
    acquire `attempts` times back to back; puts [(ms before, ms after, admitted), ...]."""
    with SyncRepository.open(name=table, endpoint_url=url, reserve=reserve) as repo:
        limiter = SyncRateLimiter(repo)
        limiter.get_limits(ENTITY, RESOURCE)  # the connection is made before the burst
        ready.wait(timeout=120)
        seen = []
        for _ in range(attempts):
            before = wall_ms()
            try:
                with limiter.acquire(ENTITY, RESOURCE, {limit.name: 1}, limits=[limit]):
                    seen.append((before, wall_ms(), True))
            except RateLimitExceeded:
                seen.append((before, wall_ms(), False))
    results.put(seen)
