"""Mutants of a throttled client's pacing without reserves (flows/throttled.py,
flows/any_shard.py); each must be caught by its test in tests/unit/test_throttled_pacing.py:

- a write through that forgets the gate's whole row (as before: the gate stays short);
- an acquire that tries another shard at once, whatever its client's gate;
- a throttled acquire that reads evidence for a doubling its client would not try.
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
