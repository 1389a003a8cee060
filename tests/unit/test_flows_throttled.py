"""A throttled acquire write (flows/any_shard.take_any_shard, flows/scaling/throttled.py), driven by
canned answers: another shard or a short wait within the acquire's wait budget, reserve
writes that count as doubling evidence and stretch the client's reserve.

Time is simulated: a `Sleep` the flow yields is answered at once and only counted.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit._flowkit import (
    T0,
    TABLE,
    answered,
    item,
    limit_part,
    make_level,
    make_state,
    ok,
    shards_answer,
)
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Result, Sleep
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.reserves.book import ReserveBook
from zae_limiter.flows.reserves.stretch import SETTLE_MS
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.scaling.knowledge import WindowSeen
from zae_limiter.flows.scaling.throttled import (
    LEAD_MS,
    MAX_SHARD_TRIES,
    MAX_THROTTLED_WAITS,
    RESERVE_WAIT_MS,
    THROTTLED_WAIT_MS,
)
from zae_limiter.flows.write.levels import Taken
from zae_limiter.flows.write.take import NOT_FETCHED

WCU = 50
FULL = {"rpm": 9000, "tpm": 900_000}


def throttle() -> RateLimiterUnavailable:
    return RateLimiterUnavailable("throttled", code="ProvisionedThroughputExceededException")


def shard_of(call: Call) -> int:
    return int(call.params["Key"]["PK"]["S"].rsplit("#", 1)[1])


def state_with(shards: int = 1, hot_window: bool = False) -> RepoState:
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = shards
    if hot_window:  # 50/s over 2 s: the partition's whole limit
        for s in range(shards):
            meta.shards.seen[("gpt", s)] = WindowSeen(T0 - 2100, 100, T0 - 100, WCU, shards)
    return state


def test_a_throttled_write_tries_another_shard_before_failing() -> None:
    state = state_with(shards=4)
    hot = {0}

    def answer(call: Call) -> Any:
        if call.op == "get_item":  # reads (of a shard never written, of a window) pass
            return Result({"Item": item(T0, FULL, shard_count=4)})
        if call.op == "batch_get_item":  # a shard that may be unmade, with its donors
            return shards_answer(call, {s: item(T0, FULL, shard_count=4) for s in range(4)})
        return throttle() if shard_of(call) in hot else ok(item(T0, FULL, shard_count=4))

    for first in range(20):  # whichever shard comes first, the acquire lands elsewhere
        hot = {first % 4}
        outcome, _calls, slept = answered(
            take_any_shard(state, make_level(shard_count=4), T0, True, NOT_FETCHED), answer
        )
        assert isinstance(outcome, Taken), outcome
        assert outcome.shard_id not in hot
        assert slept == 0  # another partition had room: no waiting


def test_a_throttled_write_on_the_only_shard_waits_and_succeeds() -> None:
    state = state_with(shards=1)
    answers = iter([throttle(), throttle(), ok(item(T0, FULL))])
    outcome, calls, slept = answered(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED), lambda _c: next(answers)
    )
    assert isinstance(outcome, Taken)
    assert len(calls) == 3 and 0 < slept <= THROTTLED_WAIT_MS


def test_unavailable_only_when_the_wait_budget_is_spent() -> None:
    """Throttled everywhere, table-level (no partition evidence): a bounded number of
    jittered tries, waits summing to the budget, then the throttle reaches the caller,
    and no doubling (more shards would only add writes)."""
    for shards in (1, 4):
        state = state_with(shards=shards)
        outcome, calls, slept = answered(
            take_any_shard(state, make_level(shard_count=shards), T0, True, NOT_FETCHED),
            lambda _c: throttle(),
        )
        assert isinstance(outcome, RateLimiterUnavailable) and outcome.throttled
        assert slept == THROTTLED_WAIT_MS
        # Each try is one request: a write, or the read of a shard this client never
        # wrote (throttled as well here); after each throttle, at most two reads of
        # windows (the shard's and another's, each at most once per EVIDENCE_READ_MS).
        tries = min(shards, MAX_SHARD_TRIES) + MAX_THROTTLED_WAITS
        writes = [c for c in calls if c.op == "update_item"]
        assert len(writes) <= tries  # not a storm
        assert {c.op for c in calls} <= {"update_item", "get_item", "batch_get_item"}
        assert len(calls) <= 3 * tries
        assert not state.entities["e1"].shards.tried
        assert state.shard_count("e1", "gpt") == shards


@pytest.mark.parametrize("reserve", [False, True])
def test_a_throttled_reserve_write_counts_toward_doubling(reserve: bool) -> None:
    """A reserve take is throttled on a shard whose partition is at its limit: shard 0 is
    doubled exactly as for a write without a reserve."""
    state = state_with(shards=1, hot_window=True)
    state.reserves = ReserveBook()
    level = make_level()
    if reserve:
        level = level.__class__(**{**_fields(level), "hold_milli": {"rpm": 5000}})
    before = item(T0 - 5000, FULL)
    after = item(T0, FULL, shard_count=2)
    answers = iter(  # shard 0 read to confirm, with shard 1 (no drained shard there)
        [throttle(), Result({"Responses": {TABLE: [before]}}), ok(after), Result({"Item": after}),
         ok(after)]
    )  # fmt: skip
    outcome, calls, _slept = answered(
        take_any_shard(state, level, T0, True, NOT_FETCHED), lambda _c: next(answers)
    )
    assert isinstance(outcome, Taken) and outcome.shard_id == 1
    doubling = calls[2].params["ExpressionAttributeValues"]
    assert [c.op for c in calls[3:]] == ["get_item", "update_item"]  # shard 1: read, written
    assert doubling[":new_shards"] == {"N": "2"}
    key = ("e1", "gpt")
    # The throttled write stretched this client's reserve (any throttled acquire write
    # does: fewer, larger writes relieve the partition); the next write, which went
    # through, stepped it back up by one step if it was a reserve write (below the target
    # still either way).
    factor = state.reserves.stretch.factor(key)
    assert factor == (0.5 + 1 / 8 if reserve else 0.5)


def test_a_table_level_throttle_of_a_reserve_write_never_doubles() -> None:
    state = state_with(shards=1)
    state.reserves = ReserveBook()
    level = make_level()
    level = level.__class__(**{**_fields(level), "hold_milli": {"rpm": 5000}})
    outcome, _calls, _slept = answered(
        take_any_shard(state, level, T0, True, NOT_FETCHED), lambda _c: throttle()
    )
    assert isinstance(outcome, RateLimiterUnavailable)
    assert not state.entities["e1"].shards.tried
    # throttled over its writes' budget and the wait for a reserve (whose lead writes too):
    # halved once per SETTLE_MS of throttles, not once per write
    halvings = 1 + (THROTTLED_WAIT_MS + RESERVE_WAIT_MS) // SETTLE_MS
    assert 0.5**halvings <= state.reserves.stretch.factor(("e1", "gpt")) <= 0.5


def _fields(level: Any) -> dict[str, Any]:
    return {name: getattr(level, name) for name in level.__dataclass_fields__}


def test_after_a_wait_a_reserve_taken_meanwhile_serves_the_acquire() -> None:
    """Another thread of the same client took a reserve while this acquire was throttled:
    after its wait the acquire is served from it, with no second write."""
    state = state_with(shards=1)
    state.reserves = ReserveBook()
    key = ("e1", "gpt")
    level = make_level()
    calls: list[Call] = []

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL)})  # a quiet window: the table's throttle
        calls.append(call)
        if len(calls) == 1:  # meanwhile, the other thread's write brought a reserve
            assert state.reserves is not None
            state.reserves.install(key, 0, level.limits, {"rpm": 5000, "tpm": 500_000}, 1, T0)
        return throttle()

    outcome, sent, slept = answered(take_any_shard(state, level, T0, True, NOT_FETCHED), answer)
    assert isinstance(outcome, Taken) and outcome.from_reserve
    assert [c.op for c in sent if c.op != "get_item"] == ["update_item"] and slept > 0
    held = state.reserves.holding(key)
    assert held is not None and held.left == {"rpm": 4000, "tpm": 400_000}


def test_after_a_throttle_the_clients_next_acquire_holds_back_before_writing() -> None:
    """The first acquire is throttled to the end of its budget; the next one, on the same
    bucket, waits before its first write instead of adding one at once; after a write
    that goes through, acquires write at once again."""
    state = state_with(shards=1)
    answered(take_any_shard(state, make_level(), T0, True, NOT_FETCHED), lambda _c: throttle())
    # One refusal in a row, not a client refused over and over (that one sheds its next
    # acquires: test_throttled_pacing.py).
    until, _row = state.entities["e1"].gate.state("gpt")
    state.entities["e1"].gate.close("gpt", until, 1)
    calls: list[str] = []

    def answer(call: Call) -> Any:
        calls.append("write")
        return ok(item(T0, FULL))

    flow = take_any_shard(state, make_level(), T0 + 1, True, NOT_FETCHED)
    first = next(flow)
    assert not isinstance(first, Call)  # a Sleep: no write before the gate opens
    outcome, _sent, _slept = answered(
        take_any_shard(state, make_level(), T0 + 1, True, NOT_FETCHED), answer
    )
    assert isinstance(outcome, Taken) and calls == ["write"]
    outcome, _sent, slept = answered(
        take_any_shard(state, make_level(), T0 + 2, True, NOT_FETCHED), answer
    )
    assert isinstance(outcome, Taken) and slept == 0


def test_after_a_throttle_the_retry_asks_for_a_reserve_at_any_rate() -> None:
    """A cold start: one acquire so far, far below the rate that makes a bucket hot for
    reserves. Its write is throttled; the write that tries again asks for a reserve (a
    throttle says the bucket is hot enough), so the client's next acquires are served
    without writing to the partition that refused it."""
    state = state_with(shards=1)
    state.reserves = ReserveBook()
    key = ("e1", "gpt")
    level = make_level()
    state.reserves.record(key, level.consume_milli, T0)
    assert not state.reserves.want(key, level.limits, level.consume_milli, 1, T0)
    answers = iter([throttle(), ok(item(T0, FULL))])
    outcome, calls, _slept = answered(
        take_any_shard(state, level, T0, True, NOT_FETCHED),
        lambda c: Result({"Item": item(T0, FULL)}) if c.op == "get_item" else next(answers),
    )
    writes = [c for c in calls if c.op == "update_item"]
    assert isinstance(outcome, Taken) and len(writes) == 2
    # a reserve raises a held count: an ADD of `#reserve<j>` (keys/takes.py)
    first, retry = (
        [k for k in w.params["ExpressionAttributeNames"] if re.fullmatch(r"#reserve\d+", k)]
        for w in writes
    )
    assert retry and not first
    assert outcome.held_milli  # the reserve it was granted


def test_after_a_wait_the_retry_is_planned_at_the_drivers_clock() -> None:
    """The driver answers a wait with its clock: the retry is planned at that time, not
    at the acquire's start plus the waits (the tries themselves take time, seconds on a
    loaded partition, and a plan seconds in the past finds the bucket drained by later
    takes of other clients: a false rejection)."""
    state = state_with(shards=1)
    woke = T0 + 3000
    flow = take_any_shard(state, make_level(), T0, True, NOT_FETCHED)
    answers = iter([throttle(), ok(item(woke, FULL))])
    writes: list[Call] = []
    request = next(flow)
    while True:
        if isinstance(request, Sleep):
            send: Any = woke
        elif request.op == "get_item":
            send = Result({"Item": item(T0, FULL)})
        else:
            writes.append(request)
            send = next(answers)
        try:
            request = flow.throw(send) if isinstance(send, BaseException) else flow.send(send)
        except StopIteration as done:
            outcome = done.value
            break
    assert isinstance(outcome, Taken) and len(writes) == 2
    first, retry = (limit_part(w.params, "rpm")[1]["now"] for w in writes)
    assert retry * T0 == first * woke  # now x ra, at the clock the driver gave


@pytest.mark.parametrize("reserve_comes", [True, False], ids=["reserve-comes", "none-comes"])
def test_past_its_write_budget_an_acquire_waits_for_a_reserve_without_writing(
    reserve_comes: bool,
) -> None:
    """Its writes' budget spent, an acquire of a client with reserves waits a while more
    for a reserve another of its acquires takes (a cold start on a throttling partition),
    writing for one itself only as the client's lead: at most once per LEAD_MS. None
    comes: the throttle reaches the caller after that wait."""
    state = state_with(shards=1)
    state.reserves = ReserveBook()
    key, level = ("e1", "gpt"), make_level()

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0, FULL)})
        return throttle()

    def on_sleep(slept: int) -> None:
        book = state.reserves
        late = reserve_comes and slept > THROTTLED_WAIT_MS + 200
        if late and book is not None and book.holding(key) is None:
            book.install(key, 0, level.limits, {"rpm": 5000, "tpm": 500_000}, 1, T0)

    outcome, calls, slept = answered(
        take_any_shard(state, level, T0, True, NOT_FETCHED), answer, on_sleep
    )
    writes = [c for c in calls if c.op == "update_item"]
    leads = -(-RESERVE_WAIT_MS // LEAD_MS)
    assert len(writes) <= 1 + MAX_THROTTLED_WAITS + leads
    if reserve_comes:
        assert isinstance(outcome, Taken) and outcome.from_reserve
        assert THROTTLED_WAIT_MS < slept < THROTTLED_WAIT_MS + RESERVE_WAIT_MS
    else:
        assert isinstance(outcome, RateLimiterUnavailable) and outcome.throttled
        assert slept == THROTTLED_WAIT_MS + RESERVE_WAIT_MS
