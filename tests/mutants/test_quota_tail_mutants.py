"""The tail of a quota's window with reserves on (tests/integration/test_quota_reserve_tail.py):

- a quota's reserve that leaves only as much again behind, as a refilling limit's does
  (`grants.grant` blind to quotas): the last tokens sit in reserves, stranded when their
  holder gets no more requests before the reset;
- a refusal remembered to the reset while reserves hold tokens (`grants.remembered_until`
  blind to held counts): what the holders give back is never seen by the clients refused;
- more than a shard's share of a sharded quota refused with "retry after 1 ms" on a full
  shard (`grants.to_reset` answering the time to full, as before): a tight retry loop
  (tests/integration/test_quota_share.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from moto import mock_aws

from tests.conftest import Clock
from tests.integration import test_quota_reserve_tail as tail
from tests.integration import test_quota_share as share
from tests.mutants import must_fail, mutant, mutant_wrapping
from zae_limiter.flows.write import grants


@pytest.fixture
def table(table_name: str) -> Iterator[str]:
    with mock_aws():
        yield table_name


def _blind_to_quotas(original: Callable[..., dict[str, int]]) -> Callable[..., dict[str, int]]:
    def broken(
        hold: Mapping[str, int],
        tokens: Mapping[str, int],
        consume: Mapping[str, int],
        quotas: frozenset[str] = frozenset(),
    ) -> dict[str, int]:
        return original(hold, tokens, consume)

    return broken


def test_the_tail_test_catches_a_quota_reserve_that_leaves_as_much_again_behind(
    table: str,
) -> None:
    with mutant_wrapping(grants, "grant", _blind_to_quotas):
        must_fail(tail.test_a_quota_reserve_leaves_sixteen_times_itself_behind, table)


def test_the_tail_test_catches_a_refusal_remembered_to_the_reset(table: str) -> None:
    def to_the_reset(_states: Any, _violations: Any, now_ms: int, wait: int) -> int:
        return now_ms + wait

    with mutant(grants, "remembered_until", to_the_reset):
        must_fail(tail.test_a_refusal_while_reserves_hold_tokens_sees_them_come_back, table)


def test_the_share_test_catches_a_refusal_that_says_retry_in_a_millisecond(
    table_name: str,
) -> None:
    def full_in(state: Any, now_ms: int) -> int:
        return int(state.full_in_ms(now_ms))

    with mutant(grants, "to_reset", full_in), mock_aws():
        clock = Clock(share.MIDNIGHT_MS - 3_600_000)
        must_fail(share.test_more_than_a_shards_share_is_refused_until_the_reset, table_name, clock)
