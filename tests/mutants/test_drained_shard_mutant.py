"""A take that finds its shard drained by a merge (its count at or below its id) and
takes from it anyway, at the count the drained item records (flows/write/take.py
`_drained` reverted): once the merge's freeze ends, the refilled item admits a whole
bucket's share (the fault simulator's seeds 7808 and 8545). The unit test catches it;
the simulator finds it too (tests/sim/sim_mutants.py, "drained-shard-taken")."""

from __future__ import annotations

import pytest

from tests.mutants import must_fail, mutant
from tests.unit import test_flows_take as takes
from zae_limiter.flows.write import take as take_module


def test_the_drained_shard_test_catches_a_take_on_the_drained_item() -> None:
    with mutant(take_module, "_drained", lambda *_: False):
        must_fail(takes.test_a_take_on_a_shard_a_merge_drained_goes_to_its_receiver)


def test_the_drained_charge_test_catches_a_charge_on_the_drained_item() -> None:
    """A lease end's charge sent again to the shard it took from after a merge drained
    it (flows/write/charge.py `_again` reverted; the fault simulator's seed 4098, and
    "drained-shard-charged" in tests/sim/sim_mutants.py)."""
    from tests.sim.sim_mutants import _again_in_place
    from tests.unit import test_flows_charge_drained as charges
    from zae_limiter.flows.write import charge as charge_module

    with mutant(charge_module, "_again", _again_in_place):
        must_fail(charges.test_a_charge_on_a_shard_a_merge_drained_goes_to_its_receiver)


def test_the_denied_delete_test_catches_a_denial_taken_for_a_throttle(
    table_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The aggregator's delete of a drained shard refused by IAM, treated like a throttle
    (`RateLimiterUnavailable.denied` always False): the raise waits in silence and its
    records are dropped, so nothing says the role lacks `DeleteItem`."""
    from moto import mock_aws

    from tests.conftest import Clock
    from tests.integration import test_aggregator as aggregator_tests
    from zae_limiter import SyncRateLimiter, SyncRepository
    from zae_limiter.errors import RateLimiterUnavailable

    clock = Clock()
    with mock_aws(), mutant(RateLimiterUnavailable, "denied", property(lambda _: False)):
        repo = SyncRepository.open(name=table_name, create_table=True, clock=clock)
        try:
            must_fail(
                aggregator_tests.test_an_aggregator_that_may_not_delete_a_drained_shard_waits_and_says_why,
                SyncRateLimiter(repo), table_name, clock, caplog,
            )  # fmt: skip
        finally:
            repo.close()
