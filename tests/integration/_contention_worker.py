"""One process of the contention test: acquire 1 token N times, count what was admitted."""

from __future__ import annotations

from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository

CAPACITY = 1000
#: One token per hour: nothing refills during the test.
LIMITS = [Limit.custom("rpm", CAPACITY, 1, 3600)]


def run(endpoint: str, table: str, entity: str, attempts: int, speculative: bool) -> int:
    repo = SyncRepository.open(name=table, endpoint_url=endpoint)
    limiter = SyncRateLimiter(repo, speculative_writes=speculative)
    admitted = 0
    for _ in range(attempts):
        try:
            with limiter.acquire(entity, "api", {"rpm": 1}):
                admitted += 1
        except RateLimitExceeded:
            pass
    repo.close()
    return admitted
