"""One process of the quota exactness test: acquire 1 token N times on a clock the
processes share, and say which window each admission was planned in.

The shared clock is an attempt counter in shared memory: before each attempt a process
counts itself and sets its own clock to `start + count x span / half`, frozen for the
whole acquire (retries included), so it knows exactly which clock planned the take. The
processes cross the boundary together, within the few attempts in flight: takes planned
before it land after it, and the other way round."""

from __future__ import annotations

from typing import Any

from zae_limiter import (
    Limit,
    RateLimiterUnavailable,
    RateLimitExceeded,
    SyncRateLimiter,
    SyncRepository,
)

_counter: Any = None


def init(counter: Any) -> None:
    """Pool initializer: the shared attempt counter."""
    global _counter
    _counter = counter


class FrozenClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def run(
    endpoint: str,
    table: str,
    limit: Limit,
    timing: tuple[int, int, int],
    attempts: int,
    reserve: bool,
    stored: bool = False,
) -> dict[str, int]:
    """{"before", "after", "rejected", "unavailable", "takes", "hits"}: admissions
    planned before `boundary` and at or after it. `stored`: the entity's stored limits
    (a sharded entity, a cascade), not passed with each call. `timing`: (start ms,
    boundary ms, attempts across all processes up to the boundary)."""
    start, boundary, half = timing
    clock = FrozenClock(start)
    repo = SyncRepository.open(name=table, endpoint_url=endpoint, clock=clock, reserve=reserve)
    limiter = SyncRateLimiter(repo)
    limits = None if stored else [limit]
    counts = dict.fromkeys(("before", "after", "rejected", "unavailable"), 0)
    for _ in range(attempts):
        with _counter.get_lock():
            _counter.value += 1
            count = _counter.value
        # Attempt `half` + 1 is the first at the boundary; the last (2 x `half`) stays
        # short of one more span past it: a session opened at the boundary is the last.
        clock.now_ms = start + count * (boundary - start) // (half + 1)
        try:
            with limiter.acquire("e", "api", {limit.name: 1}, limits=limits):
                counts["before" if clock.now_ms < boundary else "after"] += 1
        except RateLimitExceeded:
            counts["rejected"] += 1
        except RateLimiterUnavailable:
            counts["unavailable"] += 1
    repo.close()
    stats = repo.get_reserve_stats()
    return {**counts, "takes": stats.takes, "hits": stats.hits}
