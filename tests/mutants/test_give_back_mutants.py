"""Mutants of the give-back rule (flows/reserves/book.py, `apply_change`): a give-back
settles into the reserve up to what the reserve spent of its held counts, and only the
rest is written.

- whole or nothing (the rule before seed 12166): a give-back past what the reserve spent
  is written whole, and reaches the bucket's full-at time before the spent tokens it
  stands for are charged there: a bucket at its top drops the excess (a token lost).
- aged written whole (the rule before seed 5914): a reserve past `max_age_ms` settles no
  give-back either; written whole, it meets the same bucket at its top while the aged
  reserve's spending waits for its renewal.
- anything settles (the rule before seed 384): the reserve then holds tokens no held
  count says are out, and spends them a second time (tokens created).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from tests.conftest import Api
from tests.integration import test_reserves as reserves
from tests.mutants import must_fail, mutant_wrapping
from tests.unit import test_reserve as unit
from zae_limiter.flows.reserves import book as book_module

Change = Callable[[Any, Any, int, Mapping[str, int], int], dict[str, int]]


def _whole_or_nothing(original: Change) -> Change:
    """A give-back the reserve cannot settle whole is written whole."""

    def broken(self: Any, key: Any, shard_id: int, delta: Mapping[str, int], now: int) -> Any:
        held = self.holding(key)
        if held is not None and held.shard_id == shard_id:
            covered = held.taken_total()
            for name, milli in delta.items():
                if milli < 0 and held.left.get(name, 0) - milli > covered.get(name, 0):
                    return dict(delta)
        return original(self, key, shard_id, delta, now)

    return broken


def _settle_anything(original: Change) -> Change:
    """Any give-back settles into the reserve, past what its held counts cover."""

    def broken(self: Any, key: Any, shard_id: int, delta: Mapping[str, int], now: int) -> Any:
        held = self.holding(key)
        if held is None or held.shard_id != shard_id or any(v > 0 for v in delta.values()):
            return original(self, key, shard_id, delta, now)
        for name, milli in delta.items():
            held.left[name] = held.left.get(name, 0) - milli
        return {}

    return broken


def _aged_written_whole(original: Change) -> Change:
    """A reserve past its age settles nothing: every change goes to the table."""

    def broken(self: Any, key: Any, shard_id: int, delta: Mapping[str, int], now: int) -> Any:
        held = self.holding(key)
        if held is not None and now - held.born_ms >= self.settings.max_age_ms:
            return dict(delta)
        return original(self, key, shard_id, delta, now)

    return broken


def aged_written_whole() -> AbstractContextManager[Any]:
    return mutant_wrapping(book_module.ReserveBook, "apply_change", _aged_written_whole)


def whole_or_nothing() -> AbstractContextManager[Any]:
    return mutant_wrapping(book_module.ReserveBook, "apply_change", _whole_or_nothing)


def settle_anything() -> AbstractContextManager[Any]:
    return mutant_wrapping(book_module.ReserveBook, "apply_change", _settle_anything)


def test_the_give_back_test_catches_a_give_back_written_whole(api: Api) -> None:
    with whole_or_nothing():
        must_fail(reserves.test_a_give_back_past_what_the_reserve_spent_loses_no_token, api)


def test_the_unit_test_catches_a_give_back_written_whole() -> None:
    with whole_or_nothing():
        must_fail(unit.test_a_give_back_settles_what_the_reserve_spent_and_writes_only_the_rest)


def test_the_unit_test_catches_a_give_back_settled_past_the_held_counts() -> None:
    with settle_anything():
        must_fail(unit.test_a_give_back_never_leaves_a_reserve_holding_more_than_its_held_counts)


def test_the_unit_test_catches_an_aged_reserve_that_settles_nothing() -> None:
    with aged_written_whole():
        must_fail(unit.test_an_aged_reserve_settles_give_backs_and_never_spends)
