"""A count raised over a shard not made yet (flows/scaling/made.py reverted): the raise
overwrites the split snapshot the unmade shard's share sits in, and the shard, made
later, copies its donor's state of the second raise (the simulator's seed 10367). The
directed test on moto catches it (tests/integration/test_raise_when_made.py); the simulator
finds it too (tests/sim/sim_mutants.py, "raise-over-unmade-shards").

Also: the read before a raise letting a throttle out (its `except` reverted). A client
checks after a good write, so the error failed an acquire whose tokens were taken (the
simulator's seed 3733 once the check read at one shard too); the unit test catches it,
and the simulator finds it (tests/sim/sim_mutants.py, "throttled-check-raises")."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from tests.conftest import Clock
from tests.integration import test_raise_when_made as raises
from tests.mutants import must_fail, mutant
from tests.unit import test_flows_take as takes
from zae_limiter import SyncRateLimiter
from zae_limiter.flows import Flow
from zae_limiter.flows.scaling import made as made_module

limiter = raises.limiter


def _all_made_unread(*_args: Any, **_kwargs: Any) -> Flow[bool]:
    """Every shard taken as made, none read: the raise goes at once."""
    yield from ()
    return True


def assumes_all_made() -> AbstractContextManager[Any]:
    return mutant(made_module, "all_made", _all_made_unread)


def test_count_raise_test_catches_a_raise_over_an_unmade_shard(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    with assumes_all_made():
        must_fail(raises.test_no_raise_over_a_shard_not_made_yet, limiter, table_name, clock)


class _Unthrown(Exception):
    """Caught in place of a throttle: no throttle is."""


def throttled_check_raises() -> AbstractContextManager[Any]:
    return mutant(made_module, "RateLimiterUnavailable", _Unthrown)


def test_the_take_test_catches_a_throttled_check_that_fails_the_acquire() -> None:
    with throttled_check_raises():
        must_fail(takes.test_a_throttled_check_before_a_doubling_leaves_the_take_taken)
