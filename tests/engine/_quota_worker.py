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


def _held(repo: SyncRepository, name: str) -> int:
    """Whole tokens this client's reserves of the bucket hold unspent: at its first
    attempt past the boundary, what the old window can no longer admit."""
    book = repo.state.reserves
    if book is None:
        return 0
    held = [book.holding(("e", "api"))]
    held += [r for key, r in book._outgoing if key == ("e", "api")]
    return sum(max(0, r.left.get(name, 0)) for r in held if r is not None) // 1000


def run(
    endpoint: str,
    table: str,
    limit: Limit,
    timing: tuple[int, int, int],
    attempts: int,
    reserve: bool,
) -> dict[str, int]:
    """{"before", "after", "rejected", "unavailable", "takes", "hits", "stranded"}:
    admissions planned before `boundary` and at or after it; what this client's reserves
    held when it crossed the boundary. `timing`: (start ms, boundary ms, attempts
    across all processes up to the boundary)."""
    start, boundary, half = timing
    clock = FrozenClock(start)
    repo = SyncRepository.open(name=table, endpoint_url=endpoint, clock=clock, reserve=reserve)
    limiter = SyncRateLimiter(repo)
    counts = dict.fromkeys(("before", "after", "rejected", "unavailable", "stranded"), 0)
    crossed = False
    for _ in range(attempts):
        with _counter.get_lock():
            _counter.value += 1
            count = _counter.value
        # Attempt `half` + 1 is the first at the boundary; the last (2 x `half`) stays
        # short of one more span past it: a session opened at the boundary is the last.
        clock.now_ms = start + count * (boundary - start) // (half + 1)
        if clock.now_ms >= boundary and not crossed:
            crossed = True
            counts["stranded"] = _held(repo, limit.name)
        try:
            with limiter.acquire("e", "api", {limit.name: 1}, limits=[limit]):
                counts["before" if clock.now_ms < boundary else "after"] += 1
        except RateLimitExceeded:
            counts["rejected"] += 1
        except RateLimiterUnavailable:
            counts["unavailable"] += 1
    if not crossed:
        counts["stranded"] = _held(repo, limit.name)
    repo.close()
    stats = repo.get_reserve_stats()
    return {**counts, "takes": stats.takes, "hits": stats.hits}
