"""A refusal of every shard tried that never reads the others (flows/scaling/gather.py
`may_gather` always no): a calendar quota's fractions of a token spread over its shards
(2.5 tokens a shard, an odd split's quarters) stay out of reach of whole-token takes
until the reset, and the window admits less than its quota (issue 39). The moto test
catches it; the simulator's "a token out of reach" probe (sim/reach.py) judges it too."""

from __future__ import annotations

from moto import mock_aws

from tests.conftest import Clock
from tests.integration import test_quota_gather as gathered
from tests.mutants import must_fail, mutant
from zae_limiter.flows.scaling import gather as gather_module


def test_the_quota_gather_test_catches_a_refusal_that_never_reads_the_siblings(
    table_name: str,
) -> None:
    with mutant(gather_module, "may_gather", lambda *_: False), mock_aws():
        clock = Clock(gathered.MIDNIGHT_MS - 3_600_000)
        body = gathered.test_a_quota_spread_in_fractions_admits_exactly_its_allowance
        must_fail(body, table_name, clock, 10, 1)
