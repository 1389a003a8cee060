"""The yardstick: an ideal token bucket in exact rational arithmetic.

It shares nothing with the library's own arithmetic (`zae_limiter.bucket`: integer
millitokens, full-at times, rounding in the limiter's favour), so a bug there cannot hide
by being repeated here. Being exact, it is slightly more generous than the library: a
correct limiter admits at most what this bucket admits.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from zae_limiter.limits import Limit


@dataclass
class IdealBucket:
    """A bucket of `capacity` tokens gaining `refill_amount` per `refill_period_seconds`,
    continuously, full at `at_ms`. Times in ms; a time earlier than the last is read as
    the last (the bucket never goes back)."""

    capacity: Fraction
    per_ms: Fraction
    tokens: Fraction
    at_ms: int

    @classmethod
    def full(cls, limit: Limit, at_ms: int) -> IdealBucket:
        capacity = Fraction(limit.capacity)
        per_ms = Fraction(limit.refill_amount, limit.refill_period_seconds * 1000)
        return cls(capacity, per_ms, capacity, at_ms)

    def refill(self, at_ms: int) -> None:
        if at_ms > self.at_ms:
            self.tokens = min(self.capacity, self.tokens + (at_ms - self.at_ms) * self.per_ms)
            self.at_ms = at_ms

    def shortfall(self, amount: Fraction, at_ms: int) -> Fraction:
        """Take `amount` whatever the bucket holds; how far short of it the bucket was
        (0: an ideal bucket would have admitted it too)."""
        self.refill(at_ms)
        short = max(Fraction(0), amount - self.tokens)
        self.tokens -= amount
        return short

    def charge(self, amount: Fraction, at_ms: int) -> None:
        """Spend `amount` unconditionally (usage after the fact: may go into debt)."""
        self.refill(at_ms)
        self.tokens -= amount

    def give_back(self, amount: Fraction, at_ms: int) -> None:
        """Tokens back (a rollback, an adjustment down): never past capacity."""
        self.refill(at_ms)
        self.tokens = min(self.capacity, self.tokens + amount)

    def level(self, at_ms: int) -> Fraction:
        self.refill(at_ms)
        return self.tokens
