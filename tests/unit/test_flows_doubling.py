"""When a throttle prompts a doubling (flows/any_shard.take_any_shard), with canned results.

A throttle doubles the shards only when this client's last view of the shard's write-rate
window shows the partition near its own limit; otherwise the table is the bottleneck and
the throttle reaches the caller after the acquire's short wait budget, with no doubling.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit._flowkit import (
    T0,
    TABLE,
    answered,
    item,
    made_below,
    make_level,
    make_state,
    ok,
    shards_answer,
)
from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Result
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling import made
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.scaling.doubling import AVERAGE_SHARE, double
from zae_limiter.flows.scaling.evidence import EVIDENCE_READ_MS, THROTTLE_EVIDENCE_AGE_MS
from zae_limiter.flows.scaling.knowledge import WindowSeen
from zae_limiter.flows.scaling.throttled import SATURATED_ROW, THROTTLED_WAIT_MS
from zae_limiter.flows.write.levels import Taken
from zae_limiter.flows.write.take import NOT_FETCHED, after_write

WCU = 50


def throttle() -> RateLimiterUnavailable:
    return RateLimiterUnavailable("throttled", code="ProvisionedThroughputExceededException")


def run(flow: Any, results: list[Any]) -> tuple[Any, list[Call]]:
    """Drive a flow; an exception in `results` is raised inside it, as the drivers do."""
    log: list[Call] = []
    request = next(flow)
    try:
        for result in results:
            log.append(request)
            request = flow.throw(result) if isinstance(result, BaseException) else flow.send(result)
    except StopIteration as done:
        return done.value, log
    raise AssertionError(f"flow wanted more results; next request: {request!r}")


def state_that_saw(writes: int, span_ms: int, seen_ms: int = T0 - 100) -> RepoState:
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.seen[("gpt", 0)] = WindowSeen(seen_ms - span_ms, writes, seen_ms, WCU)
    return state


def test_a_throttle_on_a_shard_at_its_partition_limit_doubles_and_tries_another() -> None:
    state = state_that_saw(writes=100, span_ms=2000)  # 50/s: the partition's whole limit
    before = item(T0 - 5000, {"rpm": 9000, "tpm": 900_000})
    after = item(T0, {"rpm": 9000, "tpm": 900_000}, shard_count=2)
    outcome, log = run(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED),
        [throttle(), Result({"Responses": {TABLE: [before]}}), ok(after), Result({"Item": after}),
         ok(after)],
    )  # fmt: skip
    assert isinstance(outcome, Taken) and outcome.shard_id == 1
    # the client's view may be seconds old: shard 0 is read (not written) to confirm, with
    # shard 1 (no shard a merge drained may stand where the raise makes room)
    read = log[1].params["RequestItems"][TABLE]
    assert log[1].op == "batch_get_item" and read["ConsistentRead"] and len(read["Keys"]) == 2
    double = log[2].params
    assert double["ExpressionAttributeValues"][":new_shards"] == {"N": "2"}
    # the evidence cited is the window the client saw, so shard 0 can refuse it if stale
    assert double["ExpressionAttributeValues"][":measured_since"] == {"N": str(T0 - 100 - 2000)}
    # a shard this client never wrote is read first (it may not exist yet), then written
    assert log[3].op == "get_item" and log[3].params["Key"]["PK"]["S"].endswith("#1")
    assert log[4].params["Key"]["PK"]["S"].endswith("#1")


def test_a_throttled_client_that_missed_a_doubling_learns_it_by_reading() -> None:
    """Someone doubled already: no write to the hot partition, the next try goes to a
    shard of the new count."""
    state = state_that_saw(writes=100, span_ms=2000)
    doubled = item(T0 - 500, {"rpm": 9000, "tpm": 900_000}, shard_count=4)
    after = item(T0, {"rpm": 9000, "tpm": 900_000}, shard_count=4)
    answers = iter([throttle(), Result({"Item": doubled}), Result({"Item": after}), ok(after)])

    def answer(call: Call) -> Any:
        if call.op == "batch_get_item":  # shard 2 or 3 may be unmade: read with its donors
            next(answers)
            return shards_answer(call, {s: after for s in range(4)})
        return next(answers)

    outcome, log, _slept = answered(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED), answer
    )
    assert isinstance(outcome, Taken) and outcome.shard_id in (1, 2, 3)
    # Shard 0 is read to confirm (with shard 1, which the raise would make room for); then
    # the shard it never wrote is read first: alone, or with its donors if it may be unmade.
    assert [c.op for c in log][:2] == ["update_item", "batch_get_item"]
    assert log[2].op in ("get_item", "batch_get_item") and log[3].op == "update_item"
    assert state.shard_count("e1", "gpt") == 4


def test_evidence_older_than_shard_zeros_last_doubling_writes_nothing() -> None:
    state = state_that_saw(writes=100, span_ms=2000)
    recent = item(T0 - 500, {"rpm": 9000, "tpm": 900_000})
    recent["sd"] = {"N": str(T0 - 1000)}  # doubled (and merged back) after the window began
    outcome, log = run(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED),
        [throttle(), Result({"Responses": {TABLE: [recent]}}), Result({"Item": recent}),
         ok(recent)],
    )  # fmt: skip
    assert isinstance(outcome, Taken)
    assert [c.op for c in log] == ["update_item", "batch_get_item", "get_item", "update_item"]
    # Not a doubling. Shard 1, merged back, records the count it was drained to (1, at or
    # below its id): the probe's take goes to its receiver, shard 0 (flows/write/take.py).
    assert log[2].params["Key"]["PK"]["S"].endswith("#1")
    write = log[3].params
    assert write["Key"]["PK"]["S"].endswith("#0")
    assert not [p for p in write["ExpressionAttributeNames"] if p.startswith(keys.SPLIT)]


@pytest.mark.parametrize(
    ("writes", "span_ms", "seen_ms"),
    [
        (30, 2000, T0 - 100),  # 15/s on a 50/s partition: the table said no, not the partition
        (100, 2000, T0 - THROTTLE_EVIDENCE_AGE_MS - 1),  # hot once, but seen too long ago
        (20, 500, T0 - 100),  # half a second: no evidence either way
    ],
)
def test_a_throttle_without_partition_evidence_fails_fast(
    writes: int, span_ms: int, seen_ms: int
) -> None:
    state = state_that_saw(writes, span_ms, seen_ms)
    raised, calls, _slept = answered(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED), lambda _c: throttle()
    )
    assert isinstance(raised, RateLimiterUnavailable) and raised.throttled
    # No doubling write: the takes, and at most one read of the window per
    # EVIDENCE_READ_MS of waiting (it was throttled too: no evidence either).
    assert all("ws =" not in c.params.get("UpdateExpression", "") for c in calls)
    reads = [c for c in calls if c.op == "get_item"]
    assert len(reads) <= 1 + THROTTLED_WAIT_MS // EVIDENCE_READ_MS
    assert {c.op for c in calls} <= {"update_item", "get_item"}
    assert state.shard_count("e1", "gpt") == 1
    assert not state.entities["e1"].shards.tried


def test_a_client_that_never_saw_the_shard_does_not_double() -> None:
    state = make_state()
    raised, _calls, _slept = answered(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED), lambda _c: throttle()
    )
    assert isinstance(raised, RateLimiterUnavailable)
    assert not state.entities["e1"].shards.tried


def test_a_write_that_succeeds_records_what_the_client_saw() -> None:
    state = make_state()
    state.partition_wcu = WCU
    seen = item(T0 - 3000, {"rpm": 9000, "tpm": 900_000})
    seen["ws"], seen["wn"] = {"N": str(T0 - 1500)}, {"N": "12"}
    seen["b_wcu_cp"] = {"N": str(WCU)}  # the item's own partition limit is what counts
    outcome, _ = run(take_any_shard(state, make_level(), T0, True, NOT_FETCHED), [ok(seen)])
    assert isinstance(outcome, Taken)
    assert state.entities["e1"].shards.seen[("gpt", 0)] == WindowSeen(T0 - 1500, 12, T0, WCU)


def test_a_throttled_first_acquire_still_learns_the_entity_from_the_prefetched_item() -> None:
    """The config round trip brought shard 0's item: its facts stay known after a throttle,
    so the next acquire does not read the configs again."""
    state = make_state(known=False)
    prefetched = item(T0 - 1000, {"rpm": 9000, "tpm": 900_000}, shard_count=4)
    raised, _calls, _slept = answered(
        take_any_shard(state, make_level(), T0, True, prefetched), lambda _c: throttle()
    )
    assert isinstance(raised, RateLimiterUnavailable)
    assert "e1" in state.entities
    assert state.shard_count("e1", "gpt") == 4


def test_evidence_from_before_a_doubling_does_not_double_again() -> None:
    """The window was seen when the entity had one shard; it has two now. Its rate was
    one shard's share of the traffic: it says nothing about two."""
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    for shard in (0, 1):  # whichever shard the acquire picks
        meta.shards.seen[("gpt", shard)] = WindowSeen(T0 - 2100, 100, T0 - 100, WCU, 1)
    meta.shards.counts["gpt"] = 2
    raised, _calls, _slept = answered(
        take_any_shard(state, make_level(shard_count=2), T0, True, NOT_FETCHED),
        lambda _c: throttle(),
    )
    assert isinstance(raised, RateLimiterUnavailable)
    assert not meta.shards.tried


def _hot_item(shard: int, count: int) -> dict[str, Any]:
    """Shard `shard`'s item with a window of 100 writes in 1.5 s: 67/s, past WCU."""
    seen = item(T0 - 3000, {"rpm": 9000, "tpm": 900_000}, shard_count=count)
    seen["shard_id"] = {"N": str(shard)}
    seen["ws"], seen["wn"] = {"N": str(T0 - 1500)}, {"N": "100"}
    seen["b_wcu_cp"] = {"N": str(WCU)}
    return seen


@pytest.mark.parametrize("other_hot", [False, True], ids=["other-quiet", "other-hot"])
def test_a_hot_window_doubles_a_sharded_entity_only_when_another_shard_is_hot(
    other_hot: bool,
) -> None:
    """One shard's window among many passes the test by chance now and then (a burst):
    an entity of two or more shards doubles on a good write only when another shard
    this client saw lately proves hot as well."""
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 2
    writes = 100 if other_hot else 10
    meta.shards.seen[("gpt", 0)] = WindowSeen(T0 - 1600, writes, T0 - 100, WCU, 2)
    level = replace(make_level(shard_count=2), shard_id=1)
    flow = after_write(state, level, _hot_item(1, 2), T0)
    assert (flow is not None) is other_hot
    if flow is not None:
        read = next(flow)
        assert read.op == "batch_get_item"  # shard 1 is made: the raise may go
        call = flow.send(made_below(read))
        assert call.op == "update_item" and "shard_count" in str(call.params)


def test_no_raise_while_a_shard_below_the_count_is_unmade() -> None:
    """Seed 10367: a raise over an unmade shard overwrites the snapshot its share sits
    in; the shard, made later, copies the donor's full-at time of the second raise."""
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 4
    for shard in range(4):
        meta.shards.seen[("gpt", shard)] = WindowSeen(T0 - 2100, 100, T0 - 100, WCU, 4)
    flow = double(state, "e1", "gpt", T0, T0 - 2100, False, ["rpm"])
    read = next(flow)
    assert read.op == "batch_get_item"
    assert len(read.params["RequestItems"][TABLE]["Keys"]) == 7  # 1..3, and 4..7 above
    with pytest.raises(StopIteration):
        flow.send(made_below(read, missing=frozenset({3})))


def _doubling_of_two(state: RepoState | None = None) -> Any:
    state = state or make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 2
    return double(state, "e1", "gpt", T0, T0 - 2100, False, ["rpm"])


def _aggregators_check() -> Any:
    return made.all_made(TABLE, "ns", "e1", "gpt", 2, delete=True)


def test_a_client_leaves_a_raise_over_a_drained_shard_to_the_aggregator() -> None:
    """Issue 35: a 4 -> 2 merge left shard 2 as an item recording 2. A client may not
    delete (least privilege): it does not raise over it."""
    flow = _doubling_of_two()
    read = next(flow)
    assert len(read.params["RequestItems"][TABLE]["Keys"]) == 3  # shards 1, 2 and 3
    with pytest.raises(StopIteration):
        flow.send(made_below(read, drained=frozenset({2})))


def test_the_aggregators_raise_deletes_a_drained_shard_it_makes_room_for_first() -> None:
    """The aggregator deletes it first, fenced on what the read showed, so it is made
    again from its donor's snapshot instead of counted as it stands (refilled)."""
    flow = _aggregators_check()
    read = next(flow)
    answer = made_below(read, drained=frozenset({2}))
    drained = next(i for i in answer.response["Responses"][TABLE] if i["PK"]["S"].endswith("#2"))
    drained["b_rpm_fa"] = keys.n(T0 - 5)
    delete = flow.send(answer)
    assert delete.op == "delete_item" and delete.params["Key"]["PK"]["S"].endswith("#2")
    condition = delete.params["ConditionExpression"]
    values = delete.params["ExpressionAttributeValues"]
    assert "#shards = :shards" in condition and values[":shards"] == keys.n(2)
    assert "#full_at_0 = :full_at_0" in condition and values[":full_at_0"] == keys.n(T0 - 5)
    with pytest.raises(StopIteration) as done:
        flow.send(Result({}))
    assert done.value.value is True


@pytest.mark.parametrize("deleted", [Result({}, ok=False), throttle()], ids=["moved", "throttled"])
def test_no_raise_when_a_drained_shard_could_not_be_deleted(deleted: Any) -> None:
    """A write that landed on the drained shard since the read fails the delete (nothing
    it wrote is removed unseen); so does a throttle. The raise waits for a later try."""
    flow = _aggregators_check()
    read = next(flow)
    delete = flow.send(made_below(read, drained=frozenset({3})))
    assert delete.op == "delete_item"
    with pytest.raises(StopIteration) as done:
        flow.throw(deleted) if isinstance(deleted, BaseException) else flow.send(deleted)
    assert done.value.value is False


def test_a_shard_a_missed_raise_made_is_not_deleted() -> None:
    """A reader whose count is stale (2, shard 0 says 4) finds shard 3 made, recording 4
    (above its id): no drained shard. Its raise is sent, and fails on shard 0's count."""
    flow = _doubling_of_two()
    read = next(flow)
    answer = made_below(read, drained=frozenset({3}))
    for found in answer.response["Responses"][TABLE]:
        found[keys.A_SHARD_COUNT] = keys.n(4)
    raised = flow.send(answer)
    assert raised.op == "update_item"


def test_a_hot_window_doubles_a_single_shard_entity_on_its_own() -> None:
    state = make_state()
    state.partition_wcu = WCU
    flow = after_write(state, make_level(), _hot_item(0, 1), T0)
    assert flow is not None


def test_a_doubling_wished_for_survives_a_throttled_write_and_rides_on_the_next() -> None:
    """A doubling that could not get its own write in rides on the client's next write to
    shard 0; a throttle refuses that write too, most of the time, on the partition that
    needs the doubling: the wish stays until a write of this client gets through."""
    state = make_state()
    state.partition_wcu = WCU
    state.entities["e1"].shards.wanted["gpt"] = (1, T0 - 2000)
    seen = item(T0 - 5000, {"rpm": 9000, "tpm": 900_000})
    writes: list[Call] = []

    def answer(call: Call) -> Any:
        if call.op != "update_item":
            return Result({"Item": seen})
        writes.append(call)
        return throttle() if len(writes) == 1 else ok(item(T0, {"rpm": 9000}, shard_count=2))

    outcome, _calls, _slept = answered(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED), answer
    )
    assert isinstance(outcome, Taken)
    doubled = [":doubled_shards" in w.params["ExpressionAttributeValues"] for w in writes]
    assert doubled == [True, True]
    assert not state.entities["e1"].shards.wanted


@pytest.mark.parametrize("per_shard", [10, 45], ids=["quiet-on-average", "busy-on-average"])
def test_many_shards_double_only_when_they_are_busy_on_average(per_shard: int) -> None:
    """32 shards, and evidence enough on two of them (a throttle's burst): the entity
    doubles only when the other shards this client saw carry, pooled, the 80% of their
    limit a doubling is for."""
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 32
    for shard in range(8):  # 2 s windows seen just now: per_shard writes/s each
        meta.shards.seen[("gpt", shard)] = WindowSeen(T0 - 2100, 2 * per_shard, T0 - 100, WCU, 32)
    writes = _doubling_writes(state)
    assert len(writes) == (1 if per_shard * 1.0 / WCU >= AVERAGE_SHARE else 0)


def _doubling_writes(state: RepoState, count: int = 32) -> list[Call]:
    """The writes a throttled client's `double` sends when shard 0 confirms its `count`
    (no doubling since) and every shard below it is made."""
    writes: list[Call] = []

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": item(T0 - 3000, {"rpm": 9000}, shard_count=count)})
        if call.op == "batch_get_item":
            return made_below(call)
        writes.append(call)
        return ok(item(T0, {"rpm": 9000}, shard_count=2 * count))

    answered(double(state, "e1", "gpt", T0, T0 - 2100, True, ["rpm", "tpm"]), answer)
    return writes


def test_a_windows_first_write_is_not_counted_in_the_average() -> None:
    """Shards of 5 writes/s, each window 1.4 s long and holding 7 writes: the write that
    restarted it, 5 in between, the write that brought it back. 5 in 1.4 s is 71% of the
    limit, short of the 80% a doubling is for; counting the first write too reads 86%.
    (Measured at 16 shards of 8x a partition, 50% each: that count read 0.69, and the
    entity doubled to 32 on the next burst.)"""
    state = make_state()
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 32
    for shard in range(16):
        meta.shards.seen[("gpt", shard)] = WindowSeen(T0 - 1500, 7, T0 - 100, 5, 32)
    assert _doubling_writes(state) == []


@pytest.mark.parametrize("row", [0, SATURATED_ROW], ids=["refused-now-and-then", "over-and-over"])
def test_a_client_refused_over_and_over_doubles_on_windows_that_average_low(row: int) -> None:
    """4 shards just made 8 by a fleet that has not spread yet: two shards full, two
    quiet (pooled 0.55 of the limit). A client whose writes were refused SATURATED_ROW
    times in a row (a write through unwinds one) doubles all the same: the load is what
    the partitions refuse, not what the windows carry."""
    state = make_state()
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 4
    for shard, writes in ((0, 12), (1, 12), (2, 3), (3, 3)):
        meta.shards.seen[("gpt", shard)] = WindowSeen(T0 - 2100, writes, T0 - 100, 5, 4)
    if row:
        meta.gate.close("gpt", 0, row)
    assert len(_doubling_writes(state, 4)) == (1 if row else 0)


def _two_shards_doubled_at(doubled_ms: int, start_ms: int) -> RepoState:
    """A client of an entity of 2 shards whose view of shard 0 shows it doubled at
    `doubled_ms`, and whose views of both windows began at `start_ms` (50/s over them)."""
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 2
    writes = (T0 - 100 - start_ms) * WCU // 1000
    for shard in (0, 1):
        seen = WindowSeen(start_ms, writes, T0 - 100, WCU, 2)
        meta.shards.seen[("gpt", shard)] = seen
    zero = meta.shards.seen[("gpt", 0)]
    meta.shards.seen[("gpt", 0)] = replace(zero, doubled_ms=doubled_ms)
    return state


def test_a_window_that_began_before_shard_zeros_last_doubling_is_no_evidence() -> None:
    """A doubling that rides on a take raises shard 0's count without restarting its
    window: a view of it then records the new count over a window that counted traffic
    meant for half the shards. Shard 0 turns such evidence down (its `sd`), and the try
    it spent held this client back a whole window (measured: 2 -> 4 from second 4.5 to
    6.5 under the fixed window). It is no evidence: the client reads fresher instead."""
    from zae_limiter.flows.scaling.evidence import throttle_evidence

    level = make_level(shard_count=2)
    old = _two_shards_doubled_at(T0 - 1500, T0 - 3000)
    assert throttle_evidence(old, level, T0) is None
    assert throttle_evidence(old, replace(level, shard_id=1), T0) is None
    fresh = _two_shards_doubled_at(T0 - 3500, T0 - 3000)
    assert throttle_evidence(fresh, level, T0) == T0 - 3000


def test_evidence_turned_down_as_older_than_the_doubling_may_be_tried_again_soon() -> None:
    """The confirming read shows shard 0 doubled after the evidence began (the count is
    the same, every shard below it made): nothing is written, shard 0's window as read
    becomes the client's view of it, and the client may try again as after a throttled
    doubling write (THROTTLED_DOUBLING_RETRY_MS), not a whole window later. Turned down
    for an unmade shard, it waits the window as before."""
    from zae_limiter.flows.scaling.doubling import THROTTLED_DOUBLING_RETRY_MS, may_double

    def turned_down(missing: frozenset[int]) -> RepoState:
        state = make_state()
        state.partition_wcu = WCU
        state.entities["e1"].shards.counts["gpt"] = 2
        flow = double(state, "e1", "gpt", T0, T0 - 3000, True, ["rpm"])
        read = next(flow)
        assert read.op == "batch_get_item"
        answer = made_below(read, missing=missing)
        zero = item(T0 - 200, {"rpm": 9000}, shard_count=2)
        zero[keys.A_SHARD_DOUBLED] = keys.n(T0 - 1500)
        shard0_key = read.params["RequestItems"][TABLE]["Keys"][0]
        answer.response["Responses"][TABLE].append({**zero, **shard0_key})
        with pytest.raises(StopIteration):
            flow.send(answer)
        return state

    state = turned_down(frozenset())
    view = state.entities["e1"].shards.seen.get(("gpt", 0))
    assert view is not None and view.doubled_ms == T0 - 1500 and view.seen_ms == T0
    assert not may_double(state, "e1", "gpt", T0 + THROTTLED_DOUBLING_RETRY_MS - 1)
    assert may_double(state, "e1", "gpt", T0 + THROTTLED_DOUBLING_RETRY_MS)
    unmade = turned_down(frozenset({1}))
    assert not may_double(unmade, "e1", "gpt", T0 + keys.WINDOW_MS - 1)
