"""The fault simulator's search in the suite (docs/simulator.md): every fault kind, every
seed; a failure names the seed to replay with `python -m zae_limiter.sim --seed N`. The
seeds are split over test_search_a.py and test_search_b.py, so that two workers share them.
"""

from __future__ import annotations

import logging

from zae_limiter.sim.search import run_seeds
from zae_limiter.sim.spec import ALL_KINDS

#: Seeds per test: small enough that a slow machine reports progress.
SLICE = 500


def search(first: int) -> None:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)
    tally = run_seeds(range(first, first + SLICE))
    assert tally.schedules == SLICE
    assert set(tally.faults) == set(ALL_KINDS), "every fault kind was drawn"
    failed = "; ".join(f"seed {seed}: {why}" for seed, why in tally.failures)
    assert not tally.failures, f"{failed} (replay: python -m zae_limiter.sim --seed N)"
