"""Mutants for scheduled limits (docs/quotas.md, Scheduled limits): each breaks one rule
on purpose and shows that the guarantee's own test (tests/integration) fails on it.

- a bucket rebased at the first write after a boundary (`switched_at` answering `now`),
  as for a change an operator stored: the old numbers then refill up to that write
  instead of up to the boundary, so a rising rate admits less and a falling one more;
- a schedule the config cache froze (the limit in force picked when the config was
  read, not from the time each acquire passes in): a client keeps the old numbers until
  its cache entry expires.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, Clock
from tests.integration import test_scheduled_limits as scheduled
from tests.mutants import must_fail, mutant
from zae_limiter.errors import ValidationError
from zae_limiter.flows.records import config as config_flows
from zae_limiter.flows.write import shares


@pytest.mark.parametrize(
    "case", [(scheduled.NINE_MS, scheduled.DAY, scheduled.RUSH, 20_000)], ids=["rate-rises"]
)
def test_boundary_exactness_catches_a_rebase_at_the_first_write(
    api: Api, clock: Clock, case: tuple[Any, ...]
) -> None:
    at_now = lambda stored, limit, now_ms, count: now_ms  # noqa: E731
    with mutant(shares, "switched_at", at_now):
        must_fail(
            scheduled.test_a_bucket_crossing_a_schedule_boundary_admits_what_an_ideal_bucket_admits,
            api,
            clock,
            *case,
        )


def test_boundary_exactness_catches_a_rebase_at_the_first_write_on_a_falling_rate(
    api: Api, clock: Clock
) -> None:
    at_now = lambda stored, limit, now_ms, count: now_ms  # noqa: E731
    with mutant(shares, "switched_at", at_now):
        must_fail(
            scheduled.test_a_bucket_crossing_a_schedule_boundary_admits_what_an_ideal_bucket_admits,
            api,
            clock,
            scheduled.TEN_MS,
            scheduled.RUSH,
            scheduled.DAY,
            5_000,
        )


def test_switch_test_catches_a_schedule_frozen_by_the_config_cache(api: Api, clock: Clock) -> None:
    frozen_at: dict[int, int] = {}

    def frozen(limits: Any, now_ms: int) -> Any:
        from zae_limiter.limits import in_force

        return in_force(limits, frozen_at.setdefault(id(limits), now_ms))

    with mutant(config_flows, "in_force", frozen):
        must_fail(
            scheduled.test_the_switch_reads_no_config_and_each_client_switches_by_its_own_clock,
            api,
            clock,
            also=(ValidationError,),  # the frozen day numbers refuse an acquire of 20 outright
        )


def test_call_shape_test_catches_a_passed_schedule_frozen_by_the_shape_cache() -> None:
    """An acquire's call-shape cache (flows/acquire.py) that keeps the limits passed as they
    were in force when the shape was first validated."""
    from tests.unit import test_flows_acquire as asked_tests
    from zae_limiter.flows import acquire as asked

    frozen_at: dict[int, int] = {}

    def frozen(limits: Any, now_ms: int) -> Any:
        from zae_limiter.limits import in_force

        return in_force(limits, frozen_at.setdefault(id(limits), now_ms))

    with mutant(asked, "in_force", frozen):
        must_fail(asked_tests.test_scheduled_limits_are_those_in_force_at_each_call)
