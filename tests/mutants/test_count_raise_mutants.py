"""A mutant of the count raise's snapshot rule (keys/buckets.py `snapshot_kept`): the
raise snapshots shard 0's full-at time whatever snapshot it replaces. The guarantee's
test (tests/integration/test_count_raise.py, on moto) fails on it, and so does the
simulator's seed 8069 (tests/sim/sim_mutants.py, `raise-snapshot-goes-back`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from tests.conftest import Clock
from tests.integration import test_count_raise as count_raise
from tests.mutants import must_fail, mutant_wrapping
from zae_limiter import SyncRateLimiter
from zae_limiter.keys import buckets

#: The guarantee's tests run on their module's moto-backed limiter.
limiter = count_raise.limiter


def _any_snapshot(_original: Callable[..., str]) -> Callable[..., str]:
    def broken(split: str, full_at: str, after: str | None = None) -> str:
        return f"(attribute_not_exists({split}) OR attribute_exists({split}))"

    return broken


def snapshot_goes_back() -> AbstractContextManager[Any]:
    return mutant_wrapping(buckets, "snapshot_kept", _any_snapshot)


def test_count_raise_test_catches_a_snapshot_that_goes_back(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    with snapshot_goes_back():
        must_fail(
            count_raise.test_a_raise_never_hands_a_give_back_to_an_unmade_shard,
            limiter, table_name, clock,
        )  # fmt: skip
