"""Every decision a schedule makes, drawn from one stream of small integers.

A schedule is a function of its stream: the same stream replays the same schedule, step
for step. A seed draws a fresh stream; shrinking (`sim.shrink`) edits a recorded one and
replays it. Every draw is made so that 0 is the plainest answer (no fault, the first
client, the shortest wait), so a stream shrunk towards zeros is a simpler schedule, and a
replayed stream that runs out answers 0 from then on.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


class Choices:
    """A source of decisions: fresh from `seed`, or replayed from `prefix`."""

    def __init__(self, seed: int, prefix: Sequence[int] | None = None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        # `randrange(n)` for n > 0 is exactly `_randbelow(n)`, less its argument checks:
        # the same numbers, at a third of the cost (a schedule draws thousands).
        self._randbelow: Callable[[int], int] = getattr(self._rng, "_randbelow")  # noqa: B009
        self._prefix = prefix
        self.drawn: list[int] = []

    def below(self, n: int) -> int:
        """A whole number in [0, n)."""
        if n <= 1:
            value = 0
        elif self._prefix is None:
            value = self._randbelow(n)
        else:
            i = len(self.drawn)
            value = min(self._prefix[i], n - 1) if i < len(self._prefix) else 0
        self.drawn.append(value)
        return value

    def between(self, low: int, high: int) -> int:
        """A whole number in [low, high]; `low` is the plain answer."""
        return low + self.below(high - low + 1)

    def chance(self, per_thousand: int) -> bool:
        """True with this probability (in thousandths); a drawn 0 is always False."""
        return self.below(1000) >= 1000 - per_thousand

    def pick(self, options: Sequence[T]) -> T:
        """One of `options`; the first is the plain answer."""
        return options[self.below(len(options))]

    def weighted(self, weights: Sequence[int]) -> int:
        """The index of one of `weights` (the first is the plain answer); a weight of 0
        is never picked unless every weight is 0."""
        total = sum(weights)
        if total <= 0:
            return 0
        point = self.below(total)
        for i, weight in enumerate(weights):
            if point < weight:
                return i
            point -= weight
        return len(weights) - 1
