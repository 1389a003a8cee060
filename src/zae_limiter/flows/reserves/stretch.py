"""Fewer, larger reserve writes when a partition throttles them (before any doubling).

A client's reserve of a bucket is sized to last `1 / writes_per_second` at its own rate.
When a reserve take or top-up is throttled, the partition has less room than the fleet's
reserve writes want, and the cheapest relief is fewer writes: the client halves its write
rate target for that bucket (its reserves last twice as long, so they are twice as
large). Each reserve write that goes through adds `STEP` back, up to the configured
target: additive increase, multiplicative decrease, as in TCP's congestion control.

The stretch never lifts `max_share`: a reserve still holds at most that share of its
shard's capacity, so a stretched client whose rate is high meets the cap and goes on
writing as often as it must (see docs/reserves.md, "Under throttling").
"""

from __future__ import annotations

from collections.abc import Hashable

#: The write-rate target falls to at most 1/16 of the configured one.
MIN_FACTOR = 1 / 16
#: What one reserve write that went through gives back of the configured target.
STEP = 1 / 8
#: Throttles closer together than this (ms) are one event: one burst halves once.
SETTLE_MS = 500


class Stretch:
    """Write-rate factors per bucket key (1.0: the configured target)."""

    def __init__(self) -> None:
        self._factors: dict[Hashable, float] = {}
        self._cut_at: dict[Hashable, int] = {}

    def factor(self, key: Hashable) -> float:
        return self._factors.get(key, 1.0)

    def period_ms(self, key: Hashable, base_period_ms: float) -> float:
        """How long a reserve of `key` should last now."""
        return base_period_ms / self.factor(key)

    def throttled(self, key: Hashable, now_ms: int) -> None:
        """A reserve write to `key` was throttled: halve its write-rate target."""
        last = self._cut_at.get(key)
        if last is not None and now_ms - last < SETTLE_MS:
            return
        self._cut_at[key] = now_ms
        self._factors[key] = max(MIN_FACTOR, self.factor(key) / 2)

    def succeeded(self, key: Hashable) -> None:
        """A reserve write to `key` went through: step the target back up."""
        factor = self._factors.get(key)
        if factor is None:
            return
        if factor + STEP >= 1.0:
            self._factors.pop(key, None)
            self._cut_at.pop(key, None)
        else:
            self._factors[key] = factor + STEP
