"""The fault simulator's search in the suite (docs/simulator.md): every fault kind of a
one-region world, every seed; a failure names the seed to replay with
`python -m zae_limiter.sim --seed N`. The seeds are split over test_search_a.py and
test_search_b.py, so that two workers share them.
"""

from __future__ import annotations

import logging

from zae_limiter.sim.search import run_seeds
from zae_limiter.sim.spec import BACKGROUND_KINDS, FAULT_KINDS, OPERATOR_KINDS

#: Seeds per test: small enough that a slow machine reports progress.
SLICE = 500


def search(first: int) -> None:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)
    tally = run_seeds(range(first, first + SLICE))
    assert tally.schedules == SLICE
    # Partitions are drawn only in worlds of several regions (tests/sim/test_regions.py).
    drawn = {*FAULT_KINDS, *BACKGROUND_KINDS, *OPERATOR_KINDS}
    assert set(tally.faults) == drawn, "every fault kind was drawn"
    failed = "; ".join(f"seed {seed}: {why}" for seed, why in tally.failures)
    assert not tally.failures, f"{failed} (replay: python -m zae_limiter.sim --seed N)"
