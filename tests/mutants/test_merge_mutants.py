"""Mutants of the aggregator's merge (aggregator/merge.py): each breaks one rule of how
a halving counts the shards a doubling made room for and no acquire has made yet, and
shows the guarantee's test (tests/integration/test_aggregator.py, on moto) fails on it.
The simulator finds the first and the third as well (tests/sim/sim_mutants.py;
the second no schedule can reach, docs/guarantees.md).

- an unmade shard counted as full (seed 455: the merge created tokens);
- the receivers' split snapshots left as they were: read at the halved count, a
  snapshot stands for twice what it did;
- the transaction without its check that each unmade shard is still unmade: an acquire
  that makes one between the merge's read and its write is counted twice;
- a shard read at the count before the last raise merged all the same (the simulator's
  shards focus found it): its count fence passes once the raise is propagated to it
  before the transaction, and its unmade partner was counted at its older snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from tests.conftest import Clock
from tests.integration import test_aggregator as aggregator
from tests.mutants import must_fail, mutant, mutant_wrapping
from zae_limiter import SyncRateLimiter, keys
from zae_limiter.aggregator import merge as merge_module

#: The guarantee's tests run on its module's moto-backed limiter.
limiter = aggregator.limiter


def _unmade_as_full(original: Callable[..., int | None]) -> Callable[..., int | None]:
    def broken(stored: Mapping[int, Any], slot: int, name: str) -> int | None:
        return original(stored, slot, name) if slot in stored else None

    return broken


def _snapshots_kept(original: Callable[..., Any]) -> Callable[..., Any]:
    def broken(*args: Any) -> Any:
        full_at, _split = original(*args)
        return full_at, {i: {} for i in full_at}

    return broken


def _no_unmade_check(original: Callable[..., Any]) -> Callable[..., Any]:
    def broken(updates: Any, table: str = "", absent: Any = ()) -> Any:
        return original(updates, table, ())

    return broken


def unmade_as_full() -> AbstractContextManager[Any]:
    return mutant_wrapping(merge_module, "_slot_full_at", _unmade_as_full)


def snapshots_kept() -> AbstractContextManager[Any]:
    return mutant_wrapping(merge_module, "_receivers", _snapshots_kept)


def counts_unchecked() -> AbstractContextManager[Any]:
    return mutant(merge_module, "_all_at", lambda _stored, _count: True)


@contextmanager
def no_unmade_check() -> Iterator[None]:
    with mutant(keys, "merge_transaction", _no_unmade_check(keys.merge_transaction)):
        yield


def test_merge_test_catches_an_unmade_shard_counted_as_full(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    with unmade_as_full():
        must_fail(
            aggregator.test_merge_counts_unmade_shards_at_their_donors_snapshot,
            limiter, table_name, clock,
        )  # fmt: skip


def test_merge_test_catches_snapshots_left_at_the_old_count(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    with snapshots_kept():
        must_fail(
            aggregator.test_merge_counts_unmade_shards_at_their_donors_snapshot,
            limiter, table_name, clock,
        )  # fmt: skip


def test_merge_test_catches_a_transaction_without_its_unmade_check(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    with no_unmade_check():
        must_fail(
            aggregator.test_merge_is_cancelled_when_an_unmade_shard_is_made_meanwhile,
            limiter, table_name, clock,
        )  # fmt: skip


def test_merge_test_catches_a_shard_merged_before_its_raise_reached_it(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    with counts_unchecked():
        must_fail(
            aggregator.test_merge_skips_a_shard_its_count_has_not_reached,
            limiter, table_name, clock,
        )  # fmt: skip
