"""Mutants for the quota guarantees of docs/guarantees.md (docs/quotas.md): each breaks
one rule on purpose and shows that the guarantee's own test fails.

- a reset not conditioned on the window (the SET form's `fa <= :n` made always true):
  two clients crossing a boundary both reset, and the second erases the first's take;
- a session opened by a faster clock spent as the current one by a slower client (the
  check that a session has begun by this client's clock, dropped from `base`);
- a give-back not bounded to the window its tokens were taken in (`taken_windows`
  knowing no window): a rollback after a reset gives the new window tokens;
- a reserve that survives a reset (`ReserveBook.spend` no longer refusing a reserve
  whose calendar window ended): its holder spends the old window's tokens in the new
  one, where they are never charged;
- a reset applied on one shard only (shards other than 0 planned in the window their
  item was last written in): the new window admits only shard 0's share;
- a split that leaves a calendar quota's fractions of a token where they fall (on the
  new shard, or on a donor other than shard 0), out of reach of whole-token acquires
  when no take gathers them (flows/scaling/gather.py, turned off for these); a fraction
  moved to shard 0 without charging it (tokens created);
- a shard of a session quota that opens its own session (shards other than 0 never join
  shard 0's): a session admits a shard's share again after its own end; a split session
  quota whose fractions stay where they fall; a reserve blind to its session's end
  (spent in the next session);
- a session quota's debt not bounded (usage charged after the fact past twice the quota
  reads as a later session, whole: simulator seed 903);
- an operator's reset that writes "full at now" as for a refilling limit (a calendar
  quota deep in debt, a session opened by the reset).

Each test body passes on the real code (tests/integration) and must fail here.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from moto import mock_aws

from tests.conftest import Api, Clock, Tables
from tests.integration import test_quota_boundary as boundary
from tests.integration import test_quota_reserves as quota_reserves
from tests.integration import test_quota_reset as quota_reset
from tests.integration import test_quota_shards as quota_shards
from tests.integration import test_quotas as quotas
from tests.integration import test_session_shards as session_shards
from tests.mutants import condition_rewritten, must_fail, mutant, mutant_wrapping
from zae_limiter import RateLimitExceeded, SyncRateLimiter
from zae_limiter.bucket import LimitState
from zae_limiter.flows.offpath import controls as controls_module
from zae_limiter.flows.reserves import book as reserve_module
from zae_limiter.flows.reserves import ops as reserve_ops
from zae_limiter.flows.scaling import fractions as fractions_module
from zae_limiter.flows.scaling import gather as gather_module
from zae_limiter.flows.scaling import sessions as sessions_module
from zae_limiter.flows.write import charge as charge_flows
from zae_limiter.flows.write import plan as plan_module
from zae_limiter.keys import takes as takes_module
from zae_limiter.quota import Window


@pytest.fixture
def two(table_name: str) -> Iterator[boundary.Two]:
    with mock_aws():
        pair = boundary.Two(table_name)
        yield pair
        for repo in pair.repos:
            repo.close()


def test_reset_once_test_catches_a_reset_not_conditioned_on_the_window(
    two: boundary.Two,
) -> None:
    always = condition_rewritten(
        re.compile(r"#full_at_(\d+) <= :now_(\d+)"),
        r"(#full_at_\1 <= :now_\2 OR #full_at_\1 = #full_at_\1)",
    )
    with mutant_wrapping(takes_module, "_expression", always):
        takes_module._limit_parts.cache_clear()
        must_fail(boundary.test_two_clients_crossing_the_boundary_reset_once, two)


def _base_of_any_session(self: LimitState, now_ms: int) -> int:
    ra, window = self.refill_amount_milli, self.window
    if window is None or window.session_ms is None:
        return ORIGINAL_BASE(self, now_ms)
    if self.full_at is not None and self.full_at > self.threshold(now_ms):
        return self.full_at // ra * ra  # whenever it began, even after `now`
    return now_ms * ra


ORIGINAL_BASE = LimitState.base


def test_session_boundary_test_catches_a_session_spent_before_it_began(
    two: boundary.Two,
) -> None:
    with mutant(LimitState, "base", _base_of_any_session):
        must_fail(
            boundary.test_a_client_behind_a_session_boundary_does_not_spend_the_next_session,
            two,
        )


def test_rollback_test_catches_a_give_back_into_the_next_window(api: Api) -> None:
    clock = api.repo.clock
    with mutant(charge_flows, "taken_windows", lambda taken: {}):
        must_fail(
            quotas.test_a_rollback_after_the_reset_gives_nothing_to_the_new_window, api, clock
        )


def test_the_simulator_finds_a_reset_not_conditioned_on_the_window() -> None:
    """Seeds the simulator found this mutant with (over-admission), and that pass on the
    real code (tests/sim/test_quota_schedules.py runs them among others)."""
    from tests.sim.test_quota_schedules import failing_quota_seeds

    found = [20, 55, 65, 112]
    assert failing_quota_seeds(found) == []
    set_form = re.compile(r"#full_at_(\d+) <= :now_(\d+)")
    always = condition_rewritten(set_form, r"(#full_at_\1 <= :now_\2 OR #full_at_\1 = #full_at_\1)")
    with mutant_wrapping(takes_module, "_expression", always):
        caught = failing_quota_seeds(found)
    judged = ("over-admission", "ahead", "tokens created")
    assert caught and all(any(w in detail for w in judged) for _s, detail in caught)


def spend_past_the_reset(original: Callable[..., Any]) -> Callable[..., Any]:
    """`ReserveBook.spend` that no longer sees a calendar window's end."""

    def broken(self: Any, key: Any, limits: Any, consume: Any, now_ms: int) -> Any:
        held = self._reserves.get(key)
        if held is None or held.window_end_ms is None:
            return original(self, key, limits, consume, now_ms)
        end, held.window_end_ms = held.window_end_ms, None
        try:
            return original(self, key, limits, consume, now_ms)
        finally:
            held.window_end_ms = end

    return broken


HELD_AT_THE_RESET = (
    quota_reserves.test_a_reserve_held_at_the_reset_is_never_spent_and_its_spending_stays_behind
)


def test_reserve_test_catches_a_reserve_that_survives_a_reset(api: Api) -> None:
    broken = spend_past_the_reset(reserve_module.ReserveBook.spend)
    with mutant(reserve_module.ReserveBook, "spend", broken):
        must_fail(HELD_AT_THE_RESET, api, api.repo.clock)


def _stuck(window: Window, at_ms: int) -> Window:
    class Stuck(Window):
        __slots__ = ()

        def bounds(self, now_ms: int) -> tuple[int, int]:
            return window.bounds(min(now_ms, at_ms))

    return Stuck(cron=window.cron, tz=window.tz)


def reset_on_shard_zero_only(original: Callable[..., Any]) -> Callable[..., Any]:
    """Shards other than 0 planned in the calendar window their item was last written
    in: the reset reaches shard 0 alone."""

    def broken(bucket: Any, limit: Any, now_ms: int) -> Any:
        state, held, rebase = original(bucket, limit, now_ms)
        window = state.window
        if bucket.shard_id and window is not None and window.cron and state.full_at:
            start = state.full_at // state.refill_amount_milli
            if start < window.bounds(now_ms)[0]:
                state = replace(state, window=_stuck(window, start))
        return state, held, rebase

    return broken


#: The sharded entity of tests/integration/test_quota_shards.py, as a fixture here too.
limiter = quota_shards.limiter


def test_shard_test_catches_a_reset_applied_on_one_shard_only(
    limiter: tuple[SyncRateLimiter, Clock],
) -> None:
    with mutant_wrapping(plan_module, "current", reset_on_shard_zero_only):
        must_fail(
            quota_shards.test_every_shard_of_a_calendar_quota_resets,
            limiter,
            also=(RateLimitExceeded,),
        )


@pytest.mark.parametrize("path", ["1-to-4", "1-to-2-to-4"])
def test_split_test_catches_fractions_left_where_they_fall(table_name: str, path: str) -> None:
    with mutant(fractions_module, "fractions_of", lambda *args: {}), _without_gather():
        must_fail(quota_shards.test_a_split_quota_admits_exactly_its_allowance, table_name, path)


def _without_gather() -> Any:
    """A split's fractions moved to shard 0 are what a take finds first; a take that every
    shard refuses reaches any left behind by gathering them (flows/scaling/gather.py,
    tests/mutants/test_gather_mutant.py). The split's own move is shown with that off."""
    return mutant(gather_module, "may_gather", lambda *args: False)


def _donor_keeps_its_fraction(*args: Any) -> Any:
    return
    yield  # a flow that writes nothing


def test_split_test_catches_a_donor_that_keeps_its_fraction(table_name: str) -> None:
    # Which shards the drain draws decides whether a donor is raised by a client's take
    # (the path this mutant breaks): seeded, as a draw that raises none lets it pass
    # (1 seed of 6 of the shared generator; unseeded, it failed 3 runs of 4 on main).
    random.seed(0)
    with mutant(fractions_module, "settle_donor", _donor_keeps_its_fraction), _without_gather():
        must_fail(
            quota_shards.test_a_split_quota_admits_exactly_its_allowance,
            table_name,
            "1-to-2-to-4",
        )


def _charged_for_free(*args: Any) -> Any:
    return True
    yield  # a flow that writes nothing


def test_split_test_catches_a_fraction_moved_without_a_charge(table_name: str) -> None:
    with mutant(fractions_module, "charge_shard0", _charged_for_free):
        must_fail(
            quota_shards.test_a_split_quota_admits_exactly_its_allowance, table_name, "1-to-4"
        )


#: The sharded session quota of tests/integration/test_session_shards.py.
sharded = session_shards.sharded


def test_session_shard_test_catches_a_shard_that_opens_its_own_session(
    sharded: tuple[SyncRateLimiter, Clock, str],
) -> None:
    with mutant(sessions_module, "unjoined", lambda *args: ()):
        must_fail(session_shards.test_every_shard_shares_the_session_the_first_take_opened, sharded)


def test_split_session_test_catches_fractions_left_where_they_fall(
    table_name: str, tables: Tables
) -> None:
    with mutant(fractions_module, "fractions_of", lambda *args: {}), _without_gather():
        must_fail(
            session_shards.test_a_split_session_quota_admits_exactly_its_allowance,
            table_name,
            tables,
        )


def test_session_reserve_test_catches_a_reserve_blind_to_its_sessions_end(api: Api) -> None:
    with mutant(reserve_ops, "session_end", lambda taken: None):
        must_fail(
            quota_reserves.test_a_reserve_held_at_a_sessions_end_is_never_spent_in_the_next_session,
            api,
            api.repo.clock,
        )


def unbounded_session_debt(_state: Any, _base: int, _full_at: Any, amount: int) -> Any:
    """A session quota's charge moved by its whole amount, whatever debt it leaves."""
    return amount, None


@pytest.mark.parametrize("api", ["sync"], indirect=True)
def test_session_debt_test_catches_an_unbounded_debt(api: Api) -> None:
    with mutant(charge_flows, "session_debt", unbounded_session_debt):
        must_fail(quotas.test_a_session_in_deep_debt_stays_spent_until_its_end, api, api.repo.clock)


def full_at_now(stored: Any, _count: int, now_ms: int) -> int:
    """A reset that writes "full at now", as for a refilling limit."""
    return int(now_ms * stored.refill_amount_milli)


def test_reset_test_catches_a_calendar_quota_reset_as_a_rate(
    table_name: str, tables: Tables
) -> None:
    with mutant(controls_module, "full_now", full_at_now):
        must_fail(
            quota_reset.test_a_reset_calendar_quota_is_whole_until_its_window_ends,
            table_name,
            tables,
        )


def test_reset_test_catches_a_session_opened_by_a_reset(table_name: str, tables: Tables) -> None:
    with mutant(controls_module, "full_now", full_at_now):
        clock = Clock(quota_reset.T0)
        limiter = quota_reset.make_limiter(tables, table_name, clock, quota_reset.SESSION)
        clock.now_ms = quota_reset.T0 + 1_000
        quota_reset.made_on_four_shards(tables, limiter, table_name)
        try:
            must_fail(
                quota_reset.test_a_reset_session_quota_has_no_session_until_the_next_take,
                (limiter, clock),
            )
        finally:
            limiter.close()


def give_all(_stored: Any, window: int, amount: int) -> tuple[int, int]:
    """A session quota's give-back of its whole amount, past what the session spent."""
    return amount, window


@pytest.mark.parametrize("api", ["sync"], indirect=True)
def test_session_give_back_test_catches_a_give_back_below_the_sessions_start(api: Api) -> None:
    with mutant(charge_flows, "session_give", give_all):
        must_fail(
            quotas.test_a_give_back_past_what_a_session_spent_keeps_its_session,
            api,
            api.repo.clock,
        )
