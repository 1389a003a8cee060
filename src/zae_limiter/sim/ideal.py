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
from zae_limiter.quota import Window


@dataclass
class IdealBucket:
    """A bucket of `capacity` tokens gaining `refill_amount` per `refill_period_seconds`,
    continuously, full at `at_ms`. Times in ms; a time earlier than the last is read as
    the last (the bucket never goes back)."""

    capacity: Fraction
    per_ms: Fraction
    tokens: Fraction
    at_ms: int
    #: A quota: no refill, full again (debt cleared) when a window starts.
    window: Window | None = None
    #: A session quota's live session: when it ends, by the clock of the client whose
    #: take opened it (the start the library stores is that client's `now`), and the
    #: true time it opened (None: no session yet, or one ended by a deletion).
    ends_ms: int | None = None
    opened_ms: int = 0

    @classmethod
    def full(cls, limit: Limit, at_ms: int) -> IdealBucket:
        capacity = Fraction(limit.capacity)
        if limit.window is not None:
            return cls(capacity, Fraction(0), capacity, at_ms, limit.window)
        per_ms = Fraction(limit.refill_amount, limit.refill_period_seconds * 1000)
        return cls(capacity, per_ms, capacity, at_ms)

    @property
    def session_ms(self) -> int | None:
        return None if self.window is None else self.window.session_ms

    def open(self, clock_ms: int, at_ms: int) -> None:
        """Tokens were taken from the table at true time `at_ms` by a client whose clock
        read `clock_ms` when it planned the write: if no session is live by that clock,
        the take opened one, whole, that ends a session's length after `clock_ms`. (A
        client whose clock is behind the opener's sees the session begin late and is
        refused until then: its takes stay in the live session.)"""
        length = self.session_ms
        if length is None:
            return
        self.refill(at_ms)
        if self.ends_ms is None or clock_ms >= self.ends_ms:
            self.tokens = self.capacity
            self.ends_ms = clock_ms + length
            self.opened_ms = at_ms

    def restart(self, at_ms: int) -> None:
        """Full, with no session (the bucket items were deleted)."""
        self.refill(at_ms)
        self.tokens = self.capacity
        self.ends_ms = None

    def refill(self, at_ms: int) -> None:
        if self.session_ms is not None:
            self.at_ms = max(self.at_ms, at_ms)
            return
        if self.window is not None:
            if at_ms > self.at_ms:
                if self.window.bounds(at_ms)[0] > self.at_ms:
                    self.tokens = self.capacity
                self.at_ms = at_ms
            return
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
        """What the bucket holds at true time `at_ms`; a session that ended by then (by
        its opener's clock, as the table reads it) is whole again."""
        self.refill(at_ms)
        if self.ends_ms is not None and at_ms >= self.ends_ms:
            return self.capacity
        return self.tokens
