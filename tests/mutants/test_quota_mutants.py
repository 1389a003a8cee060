"""Mutants for the quota guarantees of docs/guarantees.md (docs/quotas.md): each breaks
one rule on purpose and shows that the guarantee's own test fails.

- a reset not conditioned on the window (the SET form's `fa <= :n` made always true):
  two clients crossing a boundary both reset, and the second erases the first's take;
- a session opened by a faster clock spent as the current one by a slower client (the
  check that a session has begun by this client's clock, dropped from `base`);
- a give-back not bounded to the window its tokens were taken in (`taken_windows`
  knowing no window): a rollback after a reset gives the new window tokens.

Each test body passes on the real code (tests/integration) and must fail here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from moto import mock_aws

from tests.conftest import Api
from tests.integration import test_quota_boundary as boundary
from tests.integration import test_quotas as quotas
from tests.mutants import condition_rewritten, must_fail, mutant, mutant_wrapping
from zae_limiter.bucket import LimitState
from zae_limiter.flows.write import charge as charge_flows
from zae_limiter.keys import takes as takes_module


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
