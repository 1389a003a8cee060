"""A cold start on a throttling partition (flows/scaling/throttled.py,
flows/scaling/any_shard.py): the client's gate after throttles that come together (and its
retries waiting for it), its
next writes asking for a reserve, and the one acquire at a time that writes for the
reserve while the others wait.

Time is simulated (canned answers, `Sleep`s counted); the gate's jitter is pinned where
a test needs to know when it opens.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit._flowkit import T0, answered, item, make_level, ok
from tests.unit.test_flows_throttled import FULL, state_with, throttle
from zae_limiter.flows import Call, Result
from zae_limiter.flows.reserves.book import ReserveBook
from zae_limiter.flows.scaling import throttled
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.scaling.throttled import (
    GATE_CAP_MS,
    LEAD_MS,
    REFUSED_RECENTLY_MS,
    THROTTLED_WAIT_MS,
)
from zae_limiter.flows.write.levels import Taken
from zae_limiter.flows.write.take import NOT_FETCHED

KEY = ("e1", "gpt")


def asks_for_reserve(call: Call) -> bool:
    """A write that takes a reserve raises a held count: an ADD of `#reserve<j>` (keys/takes.py)."""
    names = call.params.get("ExpressionAttributeNames", {})
    return any(re.fullmatch(r"#reserve\d+", name) for name in names)


def test_throttles_that_come_together_close_the_gate_once() -> None:
    """Four acquires of one client throttled in the same moment are one refusal: the gate
    grows by one step, not four (counted four times, a busy second would shut the client
    out for seconds)."""
    state, level = state_with(), make_level()
    for _ in range(4):
        throttled.note_throttle(state, level, T0)
    until, row = state.entities["e1"].gate.closed["gpt"]
    assert row == 1 and until - T0 <= 50
    throttled.note_throttle(state, level, until)  # the gate had opened: the next step
    assert state.entities["e1"].gate.closed["gpt"][1] == 2


def test_a_refusal_closes_the_gate_even_when_its_jitter_draws_no_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Full jitter draws 0 now and then: the gate still closes (for 1 ms), or the other
    throttles of the same moment would each count as a refusal of their own."""
    monkeypatch.setattr(throttled, "backoff_ms", lambda _attempt, _rng: 0)
    state, level = state_with(), make_level()
    for _ in range(4):
        throttled.note_throttle(state, level, T0)
    assert state.entities["e1"].gate.closed["gpt"] == (T0 + 1, 1)


def test_the_gate_never_stays_closed_longer_than_its_cap() -> None:
    state, level = state_with(), make_level()
    now, longest = T0, 0
    for _ in range(40):
        throttled.note_throttle(state, level, now)
        longest = max(longest, throttled.gate_ms(state, level, now))
        now += throttled.gate_ms(state, level, now)  # throttled again as soon as it opens
    assert state.entities["e1"].gate.closed["gpt"][1] == 40
    assert 0 < longest <= GATE_CAP_MS


def test_a_throttled_acquire_retries_only_after_the_gate_its_client_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Acquires of one client throttled together are one refusal: each one's retry waits
    at least until the gate that refusal closed opens, not for its own short backoff (four
    threads retrying on their own would send the refusing partition four writes each
    time, the storm a fleet's renewals start on a full shard)."""
    monkeypatch.setattr(throttled, "backoff_ms", lambda _attempt, _rng: 20)
    state, level = state_with(), make_level()
    gate_ms = 300
    writes: list[int] = []
    slept = [0]

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL)})  # a quiet window: no doubling
        writes.append(slept[0])
        if len(writes) == 1:
            # Another acquire of the client was refused a moment earlier: its gate is shut.
            state.entities["e1"].gate.closed["gpt"] = (T0 + gate_ms, 1)
            return throttle()
        return ok(item(T0, FULL))

    outcome, _calls, _total = answered(
        take_any_shard(state, level, T0, True, NOT_FETCHED),
        answer,
        lambda ms: slept.__setitem__(0, ms),
    )
    assert isinstance(outcome, Taken)
    assert writes[0] == 0 and writes[1] >= gate_ms


@pytest.mark.parametrize("later_ms", [100, REFUSED_RECENTLY_MS + 1], ids=["soon", "later"])
def test_a_write_after_a_throttle_asks_for_a_reserve_even_once_one_got_through(
    later_ms: int,
) -> None:
    """A client far below the rate that makes a bucket hot was throttled, then wrote
    once: its next acquire's first write still asks for a reserve (its one write through
    a refusing partition should serve its other acquires too), for REFUSED_RECENTLY_MS."""
    state = state_with()
    state.reserves = ReserveBook()
    level = make_level()
    state.reserves.record(KEY, level.consume_milli, T0)
    assert not state.reserves.want(KEY, level.limits, level.consume_milli, 1, T0)
    throttled.note_throttle(state, level, T0)
    throttled.note_success(state, level)  # the gate opens; the refusal is remembered
    at = T0 + later_ms
    outcome, calls, _slept = answered(
        take_any_shard(state, level, at, True, NOT_FETCHED), lambda _c: ok(item(at, FULL))
    )
    assert isinstance(outcome, Taken) and len(calls) == 1
    assert asks_for_reserve(calls[0]) == (later_ms < REFUSED_RECENTLY_MS)


def test_waiting_acquires_write_for_the_reserve_one_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(throttled, "backoff_ms", lambda _attempt, _rng: 100)
    state, level = state_with(), make_level()
    assert throttled.claim_lead(state, level, T0)
    assert not throttled.claim_lead(state, level, T0 + LEAD_MS - 1)  # another waiter: not yet
    throttled_at = T0 + LEAD_MS
    throttled.note_throttle(state, level, throttled_at)  # the lead's write: the gate closes 100 ms
    assert not throttled.claim_lead(state, level, throttled_at + 50)  # the gate binds leads too
    assert throttled.claim_lead(state, level, throttled_at + 100)


def test_a_waiting_acquire_leads_a_write_that_takes_the_clients_reserve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every write of the acquire's budget is throttled and no other acquire of its client
    takes a reserve: while it waits, it writes for one itself once the gate opens, and
    that write serves it and takes the reserve for the client's next acquires."""
    monkeypatch.setattr(throttled, "backoff_ms", lambda _attempt, _rng: 20)
    state = state_with()
    state.reserves = ReserveBook()
    level = make_level()
    state.reserves.record(KEY, level.consume_milli, T0)  # the acquire's own, as acquire() does
    slept = [0]
    writes: list[tuple[int, Call]] = []

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL)})  # a quiet window: no doubling
        writes.append((slept[0], call))
        return throttle() if slept[0] <= THROTTLED_WAIT_MS else ok(item(T0, FULL))

    outcome, _calls, _total = answered(
        take_any_shard(state, level, T0, True, NOT_FETCHED),
        answer,
        lambda ms: slept.__setitem__(0, ms),
    )
    assert isinstance(outcome, Taken) and not outcome.from_reserve
    lead_at, lead = writes[-1]
    assert lead_at > THROTTLED_WAIT_MS and asks_for_reserve(lead)
    assert outcome.held_milli  # the reserve it took, installed by acquire() (reserve_ops)
