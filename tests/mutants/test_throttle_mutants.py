"""Mutants of a throttled client's cold start (flows/scaling/throttled.py); each must be caught
by its test in tests/unit/test_throttled_cold_start.py:

- every throttle grows the gate, even those that come together with one already counted;
- a throttled acquire that retries on its own backoff, whatever its client's gate;
- a gate with no cap of its own (the background returns' 5 s);
- a client's write after a throttle that asks for no reserve once one write got through;
- waiting acquires that never write for the reserve (they only wait);
- a claim to lead that does not keep the client's other waiters out.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from tests.mutants import must_fail, mutant
from tests.unit import test_throttled_cold_start as cold
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.reserves import pacing as backoff
from zae_limiter.flows.scaling import throttled
from zae_limiter.flows.write.levels import Level


def _run(body: Callable[[pytest.MonkeyPatch], None]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        body(patch)


def _every_throttle_grows(state: RepoState, level: Level, now_ms: int) -> None:
    """note_throttle as it was: each throttle one step more, however close together."""
    meta = state.entities[level.entity_id]
    meta.gate.note_refusal(level.resource, now_ms)
    _until, row = meta.gate.state(level.resource)
    wait = min(throttled.GATE_CAP_MS, backoff.backoff_ms(row + 1, random.Random()))
    meta.gate.close(level.resource, now_ms + wait, row + 1)


def test_the_gate_test_catches_every_throttle_growing_the_gate() -> None:
    cold.test_throttles_that_come_together_close_the_gate_once()
    with mutant(throttled, "note_throttle", _every_throttle_grows):
        must_fail(cold.test_throttles_that_come_together_close_the_gate_once)


def test_the_retry_test_catches_retries_that_ignore_the_gate() -> None:
    body = cold.test_a_throttled_acquire_retries_only_after_the_gate_its_client_closed
    _run(body)
    plain = throttled.Tries.wait_ms

    def own_backoff_only(tries: throttled.Tries, _gate: int = 0) -> int | None:
        return plain(tries)

    with mutant(throttled.Tries, "wait_ms", own_backoff_only):
        must_fail(_run, body)


def test_the_cap_test_catches_a_gate_without_its_cap() -> None:
    cold.test_the_gate_never_stays_closed_longer_than_its_cap()
    with mutant(throttled, "GATE_CAP_MS", backoff.CAP_MS):
        must_fail(cold.test_the_gate_never_stays_closed_longer_than_its_cap)


def test_the_reserve_test_catches_a_write_that_forgets_the_throttle() -> None:
    body = cold.test_a_write_after_a_throttle_asks_for_a_reserve_even_once_one_got_through
    body(100)
    with mutant(throttled, "refused_lately", lambda *_a: False):
        must_fail(body, 100)


def test_the_lead_test_catches_waiters_that_never_write() -> None:
    body = cold.test_a_waiting_acquire_leads_a_write_that_takes_the_clients_reserve
    _run(body)
    with mutant(throttled, "claim_lead", lambda *_a: False):
        must_fail(_run, body)


def test_the_claim_test_catches_a_claim_that_keeps_nobody_out() -> None:
    body = cold.test_waiting_acquires_write_for_the_reserve_one_at_a_time
    _run(body)

    def open_claim(state: RepoState, level: Level, now_ms: int) -> bool:
        return not throttled.gate_ms(state, level, now_ms)

    with mutant(throttled, "claim_lead", open_claim):
        must_fail(_run, body)
