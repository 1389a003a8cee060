"""Mutants of the reserve keeper (reserve_keeper.py): an acquire pokes only a keeper that
is not watching the book, so a round that ends must say so.

- a round that ends without clearing `watching`: the next reserve finds the keeper
  "watching" and is never returned by it.
"""

from __future__ import annotations

from tests.conftest import Api, Clock
from tests.integration import test_reserves as reserves
from tests.mutants import must_fail, mutant
from zae_limiter import reserve_keeper


def test_the_restart_test_catches_a_round_that_never_says_it_ended(
    api: Api, clock: Clock
) -> None:
    tending = reserve_keeper._SyncTending if api.loop is None else reserve_keeper._AsyncTending
    # The round alone, without the `finally` that clears the flag.
    with mutant(tending, "_loop", tending._rounds):
        body = reserves.test_a_keeper_that_went_idle_starts_again_for_the_next_reserve
        must_fail(body, api, clock)
