"""Mutants of a throttled client's pacing without reserves (flows/throttled.py,
flows/any_shard.py); each must be caught by its test in tests/unit/test_throttled_pacing.py:

- a write through that forgets the gate's whole row (as before: the gate stays short);
- an acquire that tries another shard at once, whatever its client's gate;
- a throttled acquire that reads evidence for a doubling its client would not try;
- an acquire refused while another acquire had closed the gate, or by a partition that
  refuses its client over and over, that keeps its whole budget (as before: three or
  four refused writes per acquire under a full partition), and one that takes the gate
  its own refusal closed for another acquire's;
- a write from memory planned at its image's shard count, not the one the client knows
  (its test in tests/unit/test_flows_take.py);
- a client refused over and over that writes a fresh acquire while its gate is closed
  (instead of failing it without a write), and one refused lately that takes from shard 0
  while the count grows;
- a client that wishes for a doubling and sheds, holds back or picks another shard
  for the take the doubling rides on;
- a shard that may be unmade read alone (shard 0 and its donor read again to make it),
  and a donor's split that keeps its window (its tests in tests/unit/test_flows_take.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.mutants import must_fail, mutant
from tests.unit import test_throttled_pacing as pacing
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling import any_shard, throttled
from zae_limiter.flows.write.levels import Level


def _run(body: Callable[[pytest.MonkeyPatch], None]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        body(patch)


def _forget_the_row(state: RepoState, level: Level) -> None:
    meta = state.entities.get(level.entity_id)
    if meta is not None:
        meta.gate.open(level.resource)


def test_the_unwind_test_catches_a_success_that_forgets_the_row() -> None:
    body = pacing.test_a_write_through_unwinds_the_gate_by_one_throttle_not_all
    _run(body)
    with mutant(throttled, "note_success", _forget_the_row):
        must_fail(_run, body)


def test_the_crowded_test_catches_another_shard_at_once() -> None:
    body = pacing.test_a_throttle_while_the_gate_is_closed_waits_before_another_shard
    _run(body)
    with mutant(throttled, "crowded", lambda *_a: False):
        must_fail(_run, body)


def test_the_evidence_test_catches_reads_for_a_doubling_not_tried() -> None:
    body = pacing.test_a_throttled_acquire_reads_no_evidence_for_a_doubling_it_would_not_try
    body()
    with mutant(any_shard, "may_double", lambda *_a: True):
        must_fail(body)


def test_the_one_more_try_test_catches_a_whole_budget_when_crowded() -> None:
    body = pacing.test_refused_while_another_acquire_closed_the_gate_one_more_try_at_most
    body()
    with mutant(throttled.Tries, "refused_again", lambda *_a: None):
        must_fail(body)


def test_the_saturated_test_catches_a_whole_budget_when_refused_over_and_over() -> None:
    body = pacing.test_a_client_refused_over_and_over_retries_once
    body()
    with mutant(throttled, "SATURATED_ROW", 10**6):
        must_fail(body)


def test_the_own_gate_test_catches_an_acquire_crowded_by_itself() -> None:
    body = pacing.test_an_acquire_refused_by_its_own_gate_keeps_its_budget
    body()
    with mutant(throttled, "gate_until", lambda *_a: object()):  # never its own
        must_fail(body)


def test_the_known_count_test_catches_a_write_planned_at_the_image_count() -> None:
    from tests.unit import test_flows_take as takes
    from zae_limiter.flows.write import take

    body = takes.test_a_write_from_memory_is_planned_at_the_count_the_client_knows
    body()
    with mutant(take, "_at_known_count", lambda _state, _level, bucket: bucket):
        must_fail(body)


def test_the_shed_test_catches_a_saturated_client_that_writes_anyway() -> None:
    body = pacing.test_a_client_refused_over_and_over_sheds_while_its_gate_is_closed
    body()
    with mutant(throttled, "sheds", lambda *_a: False):
        must_fail(body)


def test_the_spare_test_catches_takes_on_shard_0_while_the_count_grows() -> None:
    body = pacing.test_a_client_refused_lately_leaves_shard_0_to_the_growth
    _run(body)
    with mutant(throttled, "spares_shard0", lambda *_a: False):
        must_fail(_run, body)


def test_the_donor_test_catches_a_shard_read_without_what_making_it_needs() -> None:
    from tests.unit import test_flows_take as takes
    from zae_limiter.flows.scaling import split

    body = takes.test_a_donor_that_never_saw_the_doubling_records_it_first
    body()
    with mutant(split, "may_be_unmade", lambda *_a: False):
        must_fail(body)


def test_the_donor_test_catches_a_split_that_keeps_the_donors_window() -> None:
    from tests.unit import test_flows_take as takes
    from zae_limiter import keys

    original = keys.set_shard_count
    body = takes.test_a_donor_that_never_saw_the_doubling_records_it_first
    body()
    with mutant(keys, "set_shard_count", lambda *a, **_k: original(*a[:5])):
        must_fail(body)


def test_the_rider_test_catches_a_wish_that_waits_for_a_take_to_pick_shard_0() -> None:
    body = pacing.test_a_client_that_wishes_for_a_doubling_sends_the_take_it_rides_on_at_once
    for shards in (1, 2, 8):
        body(shards)
    with mutant(throttled, "rides_doubling", lambda *_a: False):
        must_fail(body, 2)
