"""One process of the contention test: acquire 1 token N times, count the outcomes."""

from __future__ import annotations

import time

from zae_limiter import (
    Limit,
    RateLimiterUnavailable,
    RateLimitExceeded,
    SyncRateLimiter,
    SyncRepository,
)

CAPACITY = 1000
#: One token per hour: nothing refills during the test.
LIMITS = [Limit.custom("rpm", CAPACITY, 1, 3600)]
#: A limit that refills while the processes contend: the admitted count is judged against
#: an ideal bucket over the run's own span (tests/integration/test_contention.py).
REFILL_PER_S = 20
REFILLING = [Limit.custom("rpm", CAPACITY, REFILL_PER_S, 1)]


OUTCOMES = ("admitted", "rejected", "unavailable")


def run(
    endpoint: str, table: str, entity: str, attempts: int, speculative: bool = True
) -> dict[str, float]:
    """{"admitted", "rejected", "unavailable"}: every attempt lands in exactly one. An
    acquire that lost its races to other processes too often (`Contended`) or timed out
    on a loaded machine is unavailable: nothing taken, counted, never an error of the pool.
    Also the client's reserve stats, once it has closed: "hits", "takes", "lost"; and when
    its first attempt began and its last ended ("started", "ended", epoch seconds)."""
    repo = SyncRepository.open(name=table, endpoint_url=endpoint)
    limiter = SyncRateLimiter(repo, speculative_writes=speculative)
    counts = {"admitted": 0, "rejected": 0, "unavailable": 0}
    started = time.time()
    for _ in range(attempts):
        try:
            with limiter.acquire(entity, "api", {"rpm": 1}):
                counts["admitted"] += 1
        except RateLimitExceeded:
            counts["rejected"] += 1
        except RateLimiterUnavailable:
            counts["unavailable"] += 1
    ended = time.time()
    repo.close()
    stats = repo.get_reserve_stats()
    return {
        **counts,
        "hits": stats.hits,
        "takes": stats.takes,
        "lost": stats.lost,
        "started": started,
        "ended": ended,
    }
