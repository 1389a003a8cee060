"""Shrinking a failing schedule: edit its choices, keep every edit that still fails.

A schedule is its stream of choices (`sim.choices`); a smaller stream, or one with more
zeros, is a plainer schedule (fewer clients, acquires and faults, shorter waits). The
passes below delete runs of choices and lower single ones, in the order that usually
pays most, until a whole round changes nothing or the budget of replays is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Fails = Callable[[Sequence[int]], bool]


def shrink(drawn: Sequence[int], fails: Fails, budget: int = 400) -> list[int]:
    """The smallest stream found that still `fails` (at most `budget` replays)."""
    best = list(drawn)
    tries = 0

    def attempt(candidate: list[int]) -> bool:
        nonlocal best, tries
        if tries >= budget or candidate == best:
            return False
        tries += 1
        if fails(candidate):
            best = candidate
            return True
        return False

    changed = True
    while changed and tries < budget:
        changed = False
        for size in (16, 8, 4, 2, 1):
            i = 0
            while i < len(best) and tries < budget:
                if attempt(best[:i] + best[i + size :]):
                    changed = True
                else:
                    i += size
        for i in range(len(best)):
            if tries >= budget:
                break
            if best[i] and (attempt([*best[:i], 0, *best[i + 1 :]])
                            or attempt([*best[:i], best[i] // 2, *best[i + 1 :]])):  # fmt: skip
                changed = True
    return best
