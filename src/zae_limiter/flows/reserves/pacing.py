"""When background writes go out: backoff after a throttle, a budget per bucket, spread.

A client returns its reserves in the background. DynamoDB refuses a write to a hot
partition (a throttle, never applied), and a refused return must be tried again, but
not at once: the partition that refused it is still full, and every other client's
return is due at the same moment. So:

- a throttled return waits an exponential backoff with full jitter (uniform between 0
  and `BASE_MS * 2**(attempt - 1)`, at most `CAP_MS`; flows/backoff.py), counted per
  bucket and reset by a write to that bucket that goes through;
- each bucket has a write budget per client: a token bucket refilled at
  `BUDGET_MULTIPLE` times the reserve write-rate target, so a client's background
  writes to one bucket never exceed a small multiple of its normal rate, whatever
  falls due;
- a reserve's age limit is drawn between `1 - AGE_SPREAD` and 1 of `max_age_ms`, so
  reserves taken in the same second (a fleet that started together) do not all go
  back in the same second.

Pure and clock-free: every method takes the time, and randomness comes from the
`random.Random` given (seeded in tests).
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from zae_limiter.flows.backoff import backoff_ms as shared_backoff_ms

#: An outgoing entry: a (key, reserve) pair.
T = TypeVar("T", bound=tuple[Any, ...])

#: First backoff bound and the most any one wait can be (ms).
BASE_MS = 50
CAP_MS = 5000
#: Background writes per bucket per client: at most this many times the write target,
#: with bursts of `BUDGET_BURST` writes.
BUDGET_MULTIPLE = 2.0
BUDGET_BURST = 2.0
#: Budgets kept before full ones are forgotten (a gateway returns reserves of many keys).
BUDGETS_MAX = 10_000
#: A reserve goes back somewhere in the last this-much of its `max_age_ms`.
AGE_SPREAD = 0.2


def backoff_ms(attempt: int, rng: random.Random) -> int:
    """The wait before try number `attempt + 1` (attempt >= 1: this many were throttled)."""
    return shared_backoff_ms(attempt, rng, BASE_MS, CAP_MS)


def spread_age_ms(max_age_ms: int, rng: random.Random) -> int:
    """How much sooner than `max_age_ms` one reserve is due back."""
    return int(rng.uniform(0.0, AGE_SPREAD) * max_age_ms)


@dataclass(slots=True)
class _Budget:
    tokens: float
    at_ms: int


@dataclass(slots=True)
class _Retry:
    attempts: int
    not_before_ms: int


class Pacer:
    """Backoff and write budgets of one client's background writes, per bucket key.

    Not thread-safe on its own: the reserve book calls it under its lock.
    """

    def __init__(self, writes_per_second: float, rng: random.Random | None = None) -> None:
        self.rate_per_ms = BUDGET_MULTIPLE * writes_per_second / 1000
        self.rng = random.Random() if rng is None else rng
        self._budgets: dict[Hashable, _Budget] = {}
        self._retries: dict[Hashable, _Retry] = {}
        #: Writes refused by a throttle and scheduled again (for reports).
        self.retried = 0

    # ------------------------------------------------------------ outcomes
    def throttled(self, key: Hashable, now_ms: int) -> int:
        """A write to `key` was throttled: when it may be tried again (ms)."""
        retry = self._retries.get(key)
        attempts = 1 if retry is None else retry.attempts + 1
        at = now_ms + backoff_ms(attempts, self.rng)
        self._retries[key] = _Retry(attempts, at)
        self.retried += 1
        return at

    def succeeded(self, key: Hashable) -> None:
        """A write to `key` went through: its backoff starts over."""
        self._retries.pop(key, None)

    # ------------------------------------------------------------ may it go now?
    def ready_at(self, key: Hashable, now_ms: int) -> int:
        """The earliest time a background write to `key` may go out (<= now: now)."""
        retry = self._retries.get(key)
        after_backoff = now_ms if retry is None else max(now_ms, retry.not_before_ms)
        budget = self._budget(key, now_ms)
        if budget.tokens >= 1:
            return after_backoff
        short = (1 - budget.tokens) / self.rate_per_ms
        return max(after_backoff, now_ms + int(short) + 1)

    def spend(self, key: Hashable, now_ms: int) -> bool:
        """Take a write from `key`'s budget if it may go now (False: not yet)."""
        if self.ready_at(key, now_ms) > now_ms:
            return False
        self._budgets[key].tokens -= 1
        return True

    def _budget(self, key: Hashable, now_ms: int) -> _Budget:
        budget = self._budgets.get(key)
        if budget is None:
            budget = self._budgets[key] = _Budget(BUDGET_BURST, now_ms)
        elif now_ms > budget.at_ms:
            refill = (now_ms - budget.at_ms) * self.rate_per_ms
            budget.tokens = min(BUDGET_BURST, budget.tokens + refill)
            budget.at_ms = now_ms
        return budget

    def forget_idle(self, now_ms: int) -> None:
        """Drop full budgets with no backoff pending (a gateway sees many keys)."""
        for key in [k for k, b in self._budgets.items() if k not in self._retries]:
            if self._budget(key, now_ms).tokens >= BUDGET_BURST:
                del self._budgets[key]

    # ------------------------------------------------------------ the outgoing queue
    def release(self, outgoing: list[T], now_ms: int) -> tuple[list[T], list[T]]:
        """Split `outgoing` (pairs of key and reserve) into what may be written now and
        what must wait for its backoff or its bucket's budget.

        A key that was backing off and has nothing outgoing any more went through (or was
        given up): its backoff starts over.
        """
        if len(self._budgets) > BUDGETS_MAX:
            self.forget_idle(now_ms)
        waiting = {pair[0] for pair in outgoing}
        done = [
            k for k, r in self._retries.items() if k not in waiting and r.not_before_ms <= now_ms
        ]
        for key in done:
            del self._retries[key]
        out: list[T] = []
        kept: list[T] = []
        for pair in outgoing:
            (out if self.spend(pair[0], now_ms) else kept).append(pair)
        return out, kept

    def due_at(self, outgoing: list[T], now_ms: int) -> int:
        """When the first of `outgoing` may be written."""
        return min(self.ready_at(pair[0], now_ms) for pair in outgoing)
