"""How few requests a client without reserves sends to a refusing partition
(flows/throttled.py, flows/any_shard.py, flows/doubling.py): a write that gets through
unwinds the gate's row by one, not all of it; an acquire refused while its client's gate
was already closed waits before another shard; a throttled acquire reads no evidence for
a doubling its client would not try.

Time is simulated (canned answers, `Sleep`s counted); the gate's jitter is pinned.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit._flowkit import T0, TABLE, answered, item, make_level, ok, shards_answer
from tests.unit.test_flows_throttled import FULL, shard_of, state_with, throttle
from zae_limiter.errors import SHED, RateLimiterUnavailable
from zae_limiter.flows import Call, Result, Sleep
from zae_limiter.flows.reserves.book import ReserveBook
from zae_limiter.flows.scaling import throttled
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.scaling.throttled import SATURATED_ROW
from zae_limiter.flows.write.levels import Taken
from zae_limiter.flows.write.take import NOT_FETCHED


def _step_per_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # The gate a throttle closes says the row it counted: 100 ms per throttle in a row.
    monkeypatch.setattr(throttled, "backoff_ms", lambda attempt, _rng: 100 * attempt)


def test_a_write_through_unwinds_the_gate_by_one_throttle_not_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a refusing partition one write in several gets through. Forgetting the row
    on each would keep the gate at its shortest (measured: `reserve=False` at 8x a
    partition sent twice the throttled writes), so a write through opens the gate and
    counts one throttle less."""
    _step_per_row(monkeypatch)
    state, level = state_with(), make_level()
    now = T0
    for _ in range(3):  # three refusals in a row, each after the gate had opened
        throttled.note_throttle(state, level, now)
        now += throttled.gate_ms(state, level, now)
    assert state.entities["e1"].gate.closed["gpt"][1] == 3
    throttled.note_success(state, level)
    assert throttled.gate_ms(state, level, now) == 0  # the gate opens
    throttled.note_throttle(state, level, now)
    assert throttled.gate_ms(state, level, now) == 300  # the row went from 3 to 2, then 3
    for _ in range(3):
        throttled.note_success(state, level)
    assert "gpt" not in state.entities["e1"].gate.closed  # writes keep passing: all gone


def test_a_throttle_while_the_gate_is_closed_waits_before_another_shard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another acquire of the client was refused just before (its gate is closed): the
    entity's partitions are full, not one of them, and another shard at once would be
    one more refused write. The acquire waits past the gate, then writes again."""
    _step_per_row(monkeypatch)
    state = state_with(shards=4)
    state.entities["e1"].shards.tried["gpt"] = T0  # no doubling: only the retries count
    level = make_level(shard_count=4)
    refused = [0]

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL, shard_count=4)})
        if call.op == "batch_get_item":  # a shard that may be unmade, with its donors
            return shards_answer(call, {s: item(T0, FULL, shard_count=4) for s in range(4)})
        if refused[0] < 1:
            refused[0] += 1
            throttled.note_throttle(state, level, T0)  # another acquire, refused meanwhile
            return throttle()
        return ok(item(T0, FULL, shard_count=4))

    writes: list[tuple[int, int]] = []
    slept = [0]

    def counted(call: Call) -> Any:
        if call.op == "update_item":
            writes.append((slept[0], shard_of(call)))
        return answer(call)

    outcome, _calls, _total = answered(
        take_any_shard(state, level, T0, True, NOT_FETCHED),
        counted,
        lambda ms: slept.__setitem__(0, ms),
    )
    assert isinstance(outcome, Taken)
    assert len(writes) == 2
    assert writes[1][0] >= 100  # the second write came after the gate, not at once


def test_a_throttled_acquire_reads_no_evidence_for_a_doubling_it_would_not_try() -> None:
    """A client that tried a doubling within the last window would not try another:
    reading shards' windows for one is a request for nothing."""
    state = state_with(shards=2)
    state.entities["e1"].shards.tried["gpt"] = T0 - 100
    answers = iter([throttle(), ok(item(T0, FULL, shard_count=2))])

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL, shard_count=2)})
        return next(answers)

    level = make_level(shard_count=2)
    state.entities["e1"].images.items[("gpt", 0)] = item(T0, FULL, shard_count=2)
    state.entities["e1"].images.items[("gpt", 1)] = item(T0, FULL, shard_count=2)
    state.entities["e1"].images.at[("gpt", 0)] = T0
    state.entities["e1"].images.at[("gpt", 1)] = T0
    outcome, calls, _slept = answered(take_any_shard(state, level, T0, True, NOT_FETCHED), answer)
    assert isinstance(outcome, Taken)
    assert [c.op for c in calls] == ["update_item", "update_item"]


def _refused_with_gate_closed_by_another(row: int, closed: bool = True) -> list[int]:
    """An acquire on a one-shard entity whose every write is refused, each refusal
    coming while another acquire of the client had just closed the gate (`closed`; else
    with the gate open), its row at `row`: the simulated times of the acquire's writes."""
    state = state_with(shards=1)
    state.entities["e1"].shards.tried["gpt"] = T0  # no doubling: only the retries count
    level = make_level()
    state.entities["e1"].images.items[("gpt", 0)] = item(T0, FULL)
    state.entities["e1"].images.at[("gpt", 0)] = T0
    writes: list[int] = []
    slept = [0]

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL)})
        writes.append(slept[0])
        now = T0 + slept[0]
        # Another acquire of this client, refused a moment before, closed the gate.
        state.entities["e1"].gate.closed["gpt"] = (now + 40 if closed else 0, row)
        return throttle()

    with pytest.MonkeyPatch.context() as patch:  # short gates: the budget binds, not jitter
        patch.setattr(throttled, "backoff_ms", lambda _attempt, _rng: 10)
        outcome, _calls, _total = answered(
            take_any_shard(state, level, T0, True, NOT_FETCHED),
            answer,
            lambda ms: slept.__setitem__(0, ms),
        )
    assert isinstance(outcome, RateLimiterUnavailable) and outcome.throttled
    return writes


def test_refused_while_another_acquire_closed_the_gate_one_more_try_at_most() -> None:
    """The client's partitions give a few writes a second to whichever come first, and
    its fresh acquires keep them busy: a third or fourth try of a refused acquire adds a
    refused write, never an admission. One more try after a wait (the partition may have
    room by then); none once the gate's row shows the client refused over and over."""
    assert len(_refused_with_gate_closed_by_another(row=1)) == 2
    assert len(_refused_with_gate_closed_by_another(row=SATURATED_ROW)) == 1


def test_a_client_refused_over_and_over_retries_once() -> None:
    """The gate's row at SATURATED_ROW: one more try even with the gate open at each
    refusal; a client refused now and then (row 1) keeps the whole budget."""
    saturated = _refused_with_gate_closed_by_another(SATURATED_ROW, closed=False)
    assert len(saturated) == 2
    assert len(_refused_with_gate_closed_by_another(row=0, closed=False)) == 5


def test_an_acquire_refused_by_its_own_gate_keeps_its_budget() -> None:
    """The gate this acquire's own refusal closed (its first shard refused it, and the
    second at once) is no news of the partitions: its retries keep the whole budget, and
    a partition with room a moment later admits it."""
    state = state_with(shards=2)
    state.entities["e1"].shards.tried["gpt"] = T0
    answers = iter([throttle(), throttle(), throttle(), ok(item(T0, FULL, shard_count=2))])

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL, shard_count=2)})
        return next(answers)

    outcome, calls, _slept = answered(
        take_any_shard(state, make_level(shard_count=2), T0, True, NOT_FETCHED), answer
    )
    assert isinstance(outcome, Taken)
    assert [c.op for c in calls].count("update_item") == 4


def test_a_client_refused_over_and_over_sheds_while_its_gate_is_closed() -> None:
    """Its row of refusals at SATURATED_ROW and its gate closed by another acquire just
    now: a fresh acquire fails without a write, with its own code (SHED: nothing was
    sent; `throttled` all the same, a caller backs off as after one; it would wait for the gate
    and write once, refused most of the time: measured, 8 in 10). Below the row, with the
    gate open, or with reserves, it holds back and writes as before."""
    level = make_level()

    def first_step(row: int, until: int, reserves: bool = False) -> Any:
        state = state_with()
        if reserves:
            state.reserves = ReserveBook()
        state.entities["e1"].gate.note_refusal("gpt", T0 - 10)
        state.entities["e1"].gate.close("gpt", until, row)
        flow = take_any_shard(state, level, T0, True, NOT_FETCHED)
        try:
            return next(flow)
        except RateLimiterUnavailable as error:
            return error

    shed = first_step(SATURATED_ROW, T0 + 200)
    assert isinstance(shed, RateLimiterUnavailable) and shed.code == SHED
    assert shed.throttled and shed.partition_throttled is None
    assert isinstance(first_step(SATURATED_ROW - 1, T0 + 200), Sleep)  # holds back
    assert isinstance(first_step(SATURATED_ROW, T0 + 200, reserves=True), Sleep)
    opened = first_step(SATURATED_ROW, T0)  # the gate is open: it writes
    assert isinstance(opened, Call) and opened.op == "update_item"


def test_a_client_refused_lately_leaves_shard_0_to_the_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client without reserves refused in the last REFUSED_RECENTLY_MS picks its first
    shard (and a shard after a throttle) among shards 1..n-1, from 4 shards on: growing
    the count writes shard 0 (the doubling, and a check in every new shard's
    transaction). Below 4 shards, with reserves, or not refused lately, shard 0 is one
    of the choices."""

    def firsts(shards: int, refused: bool = True, reserves: bool = False) -> set[int]:
        seen: set[int] = set()
        for seed in range(40):
            state = state_with(shards=shards)
            state.rng.seed(seed)
            if reserves:
                state.reserves = ReserveBook()
            if refused:
                state.entities["e1"].gate.note_refusal("gpt", T0 - 100)
            flow = take_any_shard(state, make_level(shard_count=shards), T0, True, NOT_FETCHED)
            call = next(flow)
            if isinstance(call, Call) and call.op == "batch_get_item":
                call = call.params["RequestItems"][TABLE]["Keys"][0]
                seen.add(int(call["PK"]["S"].rsplit("#", 1)[1]))
            elif isinstance(call, Call):
                seen.add(shard_of(call))
        return seen

    assert firsts(4) == {1, 2, 3}
    assert 0 in firsts(4, refused=False)
    assert 0 in firsts(4, reserves=True)
    assert firsts(2) == {0, 1}

    # After a throttle, the next shard is not shard 0 either.
    state = state_with(shards=8)
    state.entities["e1"].gate.note_refusal("gpt", T0 - 100)
    tried: list[int] = []

    def answer(call: Call) -> Any:
        if call.op == "batch_get_item":
            return shards_answer(call, {s: item(T0, FULL, shard_count=8) for s in range(8)})
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL, shard_count=8)})
        tried.append(shard_of(call))
        return throttle() if len(tried) == 1 else ok(item(T0, FULL, shard_count=8))

    for _ in range(10):
        tried.clear()
        outcome, _calls, _slept = answered(
            take_any_shard(state, make_level(shard_count=8), T0, True, NOT_FETCHED), answer
        )
        assert isinstance(outcome, Taken) and 0 not in tried
        state.entities["e1"].gate.open("gpt")


@pytest.mark.parametrize("shards", [1, 2, 8])
def test_a_client_that_wishes_for_a_doubling_sends_the_take_it_rides_on_at_once(
    shards: int,
) -> None:
    """Its doubling write was throttled, so the doubling is wished for and rides on its
    next take to shard 0 (flows/write/take.py). That take goes to shard 0, whichever
    shard it would have picked, and is neither shed nor held back by the gate: it is the
    write that relieves the partitions (measured under the fixed window, 8x a partition:
    the wish rode 0.5-3.5 s after the first doubling try, 4-13 doubling writes refused).
    A wish from a count this client no longer knows rides on nothing."""
    level = make_level(shard_count=shards)

    def first_step(wanted_from: int | None) -> Any:
        state = state_with(shards=shards)
        meta = state.entities["e1"]
        for s in range(shards):  # every shard known: only the wish picks the shard
            meta.images.keep(("gpt", s), item(T0, FULL, shard_count=shards), T0 - 50)
        meta.gate.note_refusal("gpt", T0 - 10)
        meta.gate.close("gpt", T0 + 200, SATURATED_ROW)  # would shed, or hold back
        if wanted_from is not None:
            meta.shards.want_doubling("gpt", wanted_from, T0 - 1500)
        state.rng.seed(3)
        try:
            return next(take_any_shard(state, level, T0, True, NOT_FETCHED))
        except RateLimiterUnavailable as error:
            return error

    ride = first_step(shards)
    assert isinstance(ride, Call) and ride.op == "update_item" and shard_of(ride) == 0
    assert ":doubled_shards" in ride.params["ExpressionAttributeValues"]
    stale = first_step(shards // 2 or 7)  # a wish from another count: shed as before
    assert isinstance(stale, RateLimiterUnavailable) and stale.code == SHED
