"""Mutant of a session quota's shard split off a throttled donor (flows/scaling/split.py
`_empty`): emptied from the split's `now` instead of in its donor's session, the new
shard opens a session of its own (the fix of simulator seed 195 reverted). Its directed
test (tests/unit/test_split_throttled_donor.py) must fail on it; the simulator finds it
at seed 195 of quota worlds (tests/sim/sim_mutants.py)."""

from __future__ import annotations

from typing import Any

from tests.mutants import must_fail, mutant
from tests.unit import test_split_throttled_donor as directed
from zae_limiter.flows.scaling import split
from zae_limiter.flows.write.shares import stored_config


def emptied_from_now(limit: Any, count: int, now_ms: int, _donor: Any) -> int:
    return stored_config(limit).with_tokens(0, now_ms, count)


def test_the_directed_test_catches_a_shard_that_opens_a_session_of_its_own() -> None:
    with mutant(split, "_empty", emptied_from_now):
        must_fail(directed.test_a_session_quotas_empty_shard_is_in_its_donors_session)
