"""A process's reserves of a regional share (flows/regional_run.Memory): threads of one
process take concurrently, and every reserved token is spent within RESERVE_LIFE_MS of
its own take (its held count may roll into the full-at time after that: docs/global.md)."""

from __future__ import annotations

from zae_limiter.flows.regional_run import RESERVE_LIFE_MS, Memory
from zae_limiter.keys.regions import HELD_EPOCH_MS


def test_reserves_taken_together_are_all_kept() -> None:
    memory = Memory()
    memory.hold(3000, 0)
    memory.hold(2000, 10)  # another thread's take, landing while the first is live
    assert memory.reserve_milli == 5000
    assert sum(memory.spend(1000, 20) for _ in range(6)) == 5
    assert memory.lost_milli == 0


def test_every_reserved_token_is_spent_within_its_own_life() -> None:
    memory = Memory()
    memory.hold(5000, 0)
    memory.hold(5000, RESERVE_LIFE_MS - 50)
    at = RESERVE_LIFE_MS + 10  # the first reserve has aged, the second has not
    spent = sum(memory.spend(1000, at) for _ in range(12))
    assert spent == 5
    assert memory.lost_milli == 5000


def test_a_reserve_dies_before_its_held_count_can_roll() -> None:
    # Taken at the end of an epoch, its count rolls into `fa` two epochs later at the
    # earliest; the reserve must be dead by the start of the epoch after next.
    assert RESERVE_LIFE_MS <= HELD_EPOCH_MS
