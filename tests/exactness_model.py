"""The yardstick for exactness tests: an ideal token bucket, and burst scenarios.

`IdealBucket` is a textbook token bucket in exact rational arithmetic (`Fraction`): no
milli-units, no rounding, no storage. It shares nothing with the library's own arithmetic
(`zae_limiter.bucket`), so a bug there cannot hide by being repeated here. Being exact, it
is slightly more generous than the library, which rounds in its own favour: a correct
limiter admits at most what this bucket admits.

A scenario is a plan of arrivals (offset in ms from its start, amount, whether it belongs
to the burst being judged). A driver plays the plan against a real limiter, on a simulated
clock or in real time, and records the time each acquire was made and whether it was
admitted. `judge` feeds the same times and amounts to the ideal bucket and compares.

Stdlib only: the benchmark imports it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol


class LimitLike(Protocol):
    """What the model needs of a limit: this library's `Limit` and the published one fit."""

    @property
    def capacity(self) -> int: ...

    @property
    def refill_amount(self) -> int: ...

    @property
    def refill_period_seconds(self) -> int: ...


class IdealBucket:
    """A token bucket of `capacity` gaining `refill_amount` per `refill_period_seconds`,
    continuously, full when created. Times are ms and may only move forward."""

    def __init__(self, limit: LimitLike, at_ms: int) -> None:
        self.capacity = Fraction(limit.capacity)
        self.per_ms = Fraction(limit.refill_amount, limit.refill_period_seconds * 1000)
        self.tokens = self.capacity
        self.at_ms = at_ms

    def refill(self, at_ms: int) -> None:
        # A clock read out of order (two clients) adds nothing rather than going back.
        if at_ms > self.at_ms:
            gained = (at_ms - self.at_ms) * self.per_ms
            self.tokens = min(self.capacity, self.tokens + gained)
            self.at_ms = at_ms

    def take(self, amount: int, at_ms: int) -> bool:
        """Admit `amount` if the bucket holds it now."""
        self.refill(at_ms)
        if self.tokens >= amount:
            self.tokens -= amount
            return True
        return False

    def charge(self, amount: int, at_ms: int) -> None:
        """Spend `amount` unconditionally (an adjustment): the bucket may go into debt."""
        self.refill(at_ms)
        self.tokens -= amount

    def give_back(self, amount: int, at_ms: int) -> None:
        """Return `amount` (a rollback, an adjustment down): never past capacity."""
        self.refill(at_ms)
        self.tokens = min(self.capacity, self.tokens + amount)


@dataclass(frozen=True, slots=True)
class Arrival:
    offset_ms: int
    amount: int = 1
    judged: bool = False  # part of the burst whose admissions are compared


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    arrivals: tuple[Arrival, ...]


def _evenly(start_ms: int, count: int, gap_ms: int, judged: bool) -> list[Arrival]:
    return [Arrival(start_ms + i * gap_ms, 1, judged) for i in range(count)]


def burst_scenarios(fill_ms: int, burst: int = 40, burst_gap_ms: int = 2) -> list[Scenario]:
    """The three ways a bucket comes to a burst, scaled to the time it takes to fill
    (`fill_ms` = capacity / refill rate): after sitting idle, after a trickle that keeps
    it near full, and after being drained and left to refill. `burst_gap_ms` is the time
    between back-to-back acquires (0 in real time: they follow as fast as they answer)."""
    idle = 3 * fill_ms
    after_idle = [Arrival(0), *_evenly(idle, burst, burst_gap_ms, True)]
    trickle_gap = fill_ms // 2  # light traffic: each take is refilled before the next
    trickle = _evenly(0, 10, trickle_gap, False)
    after_trickle = [*trickle, *_evenly(10 * trickle_gap, burst, burst_gap_ms, True)]
    drain = _evenly(0, burst, burst_gap_ms, False)
    drained_at = drain[-1].offset_ms
    after_drain = [*drain, *_evenly(drained_at + idle, burst, burst_gap_ms, True)]
    return [
        Scenario("after-idle", tuple(after_idle)),
        Scenario("after-trickle", tuple(after_trickle)),
        Scenario("after-drain", tuple(after_drain)),
    ]


def fill_ms(limit: LimitLike) -> int:
    """How long an empty bucket of this limit takes to fill, in whole ms."""
    period_ms = limit.refill_period_seconds * 1000
    return -(-limit.capacity * period_ms // limit.refill_amount)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A scenario's run against the ideal bucket fed the same times and amounts."""

    admitted: int  # in the judged burst
    ideal: int
    attempts: int
    burst_ms: int  # from the burst's first acquire to its last
    worst_excess: int  # the most the run was ever ahead of the ideal, counted from the start

    @property
    def over(self) -> int:
        return self.admitted - self.ideal


def judge(limit: LimitLike, plan: Sequence[Arrival], seen: Sequence[tuple[int, bool]]) -> Verdict:
    """`seen`: (ms the acquire was made, admitted) for each planned arrival, in order."""
    if len(plan) != len(seen) or not seen:
        raise ValueError(f"{len(seen)} results for a plan of {len(plan)} arrivals")
    bucket = IdealBucket(limit, seen[0][0])
    admitted = ideal = ahead = worst = 0
    judged_times = []
    for arrival, (at_ms, ok) in zip(plan, seen, strict=True):
        fits = bucket.take(arrival.amount, at_ms)
        ahead += int(ok) - int(fits)
        worst = max(worst, ahead)
        if arrival.judged:
            judged_times.append(at_ms)
            admitted += ok
            ideal += fits
    burst_ms = judged_times[-1] - judged_times[0] if judged_times else 0
    return Verdict(admitted, ideal, len(judged_times), burst_ms, worst)


def merge(runs: Iterable[Sequence[tuple[int, bool]]]) -> list[tuple[int, bool]]:
    """Several clients' (ms, admitted) in one time order, for one shared bucket."""
    return sorted(entry for run in runs for entry in run)


class SimClock:
    """Milliseconds that move only when a driver sets them (a repository's `clock=`)."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now
