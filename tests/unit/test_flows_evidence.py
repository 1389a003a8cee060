"""Evidence of a hot partition (flows/scaling/evidence.py, and what flows/write/take.py counts
for it): lost races counted in the window, the window before a restart, the read after a
throttle."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from tests.unit._flowkit import (
    T0,
    answered,
    drive,
    failed,
    item,
    make_level,
    make_state,
    ok,
    two_shards,
)
from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Result
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.scaling.evidence import (
    EVIDENCE_READ_MS,
    THROTTLED_EVIDENCE_SIGMAS,
    THROTTLED_THRESHOLD,
    entity_evidence,
    evidence_since,
    partition_bound,
    read_evidence,
    throttle_evidence,
    window_seen,
)
from zae_limiter.flows.scaling.knowledge import WindowSeen
from zae_limiter.flows.write.levels import Taken
from zae_limiter.flows.write.take import NOT_FETCHED, UNCOUNTED_MS, take

WCU = 10
FULL = {"rpm": 9000, "tpm": 900_000}


def counted(call: Call) -> int:
    """What a take write adds to (or restarts) the window with."""
    return int(call.params["ExpressionAttributeValues"][":writes"]["N"])


def throttle() -> RateLimiterUnavailable:
    return RateLimiterUnavailable("throttled", code="ProvisionedThroughputExceededException")


# ---------------------------------------------------------------- lost races are counted
def test_the_write_that_lands_counts_the_races_its_take_lost() -> None:
    state = make_state()
    old = item(T0 - 1000, FULL)
    outcome, log = drive(
        take(state, make_level(), T0, True), [failed(old), failed(old), None, ok()]
    )
    assert isinstance(outcome, Taken)
    writes = [step for step in log if isinstance(step, Call)]
    assert [counted(c) for c in writes] == [1, 2, 3]


def test_lost_races_of_a_take_that_failed_are_counted_by_the_next_good_write() -> None:
    state = make_state()
    old = item(T0 - 1000, FULL)
    raised, _log = _throttled_after(state, old)
    assert isinstance(raised, RateLimiterUnavailable)
    # the next take, on another shard of the bucket: its write counts the lost race
    _, log = drive(take(state, make_level(shard_count=2), T0 + 10, True), [ok()])
    assert counted(log[0]) == 2
    # and only once
    _, log = drive(take(state, make_level(), T0 + 20, True), [ok()])
    assert counted(log[0]) == 1


def test_lost_races_from_a_window_ago_are_not_counted() -> None:
    state = make_state()
    _throttled_after(state, item(T0 - 1000, FULL))
    _, log = drive(take(state, make_level(), T0 + UNCOUNTED_MS + 1, True), [ok()])
    assert counted(log[0]) == 1


def _throttled_after(state: Any, old: Any) -> tuple[Any, list[Any]]:
    """A take that loses one race, then is throttled."""
    flow = take(state, make_level(), T0, True)
    log = [next(flow)]
    log.append(flow.send(failed(old)))
    try:
        flow.throw(throttle())
    except RateLimiterUnavailable as error:
        return error, log
    raise AssertionError("the throttle did not reach the caller")


# ---------------------------------------------------------------- the window before
def _seen(start: int, writes: int, prev_start: int = -1, prev_writes: int = 0) -> WindowSeen:
    return WindowSeen(start, writes, T0, WCU, 1, prev_start, prev_writes)


def test_a_young_window_is_judged_with_the_one_before_it() -> None:
    # 300 ms into a window with 3 writes; the 2 s before it held 20 (the partition's limit)
    young = _seen(T0 - 300, 3, T0 - 2300, 20)
    assert partition_bound(young, THROTTLED_THRESHOLD, THROTTLED_EVIDENCE_SIGMAS)
    assert evidence_since(young) == T0 - 2300
    # without the one before, 300 ms is no evidence at all
    alone = _seen(T0 - 300, 3)
    assert not partition_bound(alone, THROTTLED_THRESHOLD, THROTTLED_EVIDENCE_SIGMAS)
    assert evidence_since(alone) == T0 - 300
    # a quiet partition stays quiet, whichever windows are read
    quiet = _seen(T0 - 300, 1, T0 - 2300, 4)
    assert not partition_bound(quiet, THROTTLED_THRESHOLD, THROTTLED_EVIDENCE_SIGMAS)


def test_a_window_past_a_second_is_judged_alone() -> None:
    # 1.5 s of the current window at the limit: the previous (quiet) one is not mixed in
    seen = _seen(T0 - 1500, 16, T0 - 3500, 0)
    assert partition_bound(seen, THROTTLED_THRESHOLD, THROTTLED_EVIDENCE_SIGMAS)
    assert evidence_since(seen) == T0 - 1500


def test_a_throttle_on_a_partition_of_few_writes_is_judged_on_both_windows() -> None:
    """At 5 writes/s a partition at its limit fills a 1.2 s window with 6 writes: too few
    to pass the bound alone (so it would never double, and go on refusing), but with the
    2 s before it, also at the limit, the stretch proves it. A quiet window before does
    not hide a load that just rose (the current one alone is judged first), and a shard
    below the threshold in both stays a table-level throttle."""
    wcu = 5
    state = make_state()
    state.partition_wcu = wcu
    level = make_level()
    meta = state.entities["e1"]

    def judged(start: int, writes: int, prev_start: int, prev_writes: int) -> int | None:
        seen = WindowSeen(start, writes, T0, wcu, 1, prev_start, prev_writes)
        meta.shards.seen[("gpt", 0)] = seen
        return throttle_evidence(state, level, T0)

    assert not partition_bound(
        WindowSeen(T0 - 1200, 6, T0, wcu, 1), THROTTLED_THRESHOLD, THROTTLED_EVIDENCE_SIGMAS
    )
    assert judged(T0 - 1200, 6, T0 - 3200, 10) == T0 - 3200
    assert judged(T0 - 1900, 10, T0 - 3900, 0) == T0 - 1900  # rose just now: alone
    assert judged(T0 - 1200, 3, T0 - 3200, 5) is None  # half the limit: the table's


def test_window_seen_reads_the_window_before() -> None:
    image = item(T0, FULL)
    image.update({"wps": {"N": str(T0 - 2300)}, "wpn": {"N": "20"}, "ws": {"N": str(T0 - 300)}})
    seen = window_seen(image, T0, WCU)
    assert (seen.prev_start_ms, seen.prev_writes, seen.start_ms) == (T0 - 2300, 20, T0 - 300)


# ---------------------------------------------------------------- the read after a throttle
def _hot_item(shard_count: int = 1) -> dict[str, Any]:
    hot = item(T0 - 2000, FULL, shard_count=shard_count)
    hot.update({"ws": {"N": str(T0 - 2000)}, "wn": {"N": "20"}, "b_wcu_cp": {"N": str(WCU)}})
    return hot


def test_a_throttled_client_with_no_window_reads_one_and_judges_it() -> None:
    state = make_state()
    since, calls, _ = answered(
        read_evidence(state, make_level(), T0), lambda _c: Result({"Item": _hot_item()})
    )
    assert [c.op for c in calls] == ["get_item"] and calls[0].params["ConsistentRead"]
    assert since == T0 - 2000
    # at most one read per EVIDENCE_READ_MS: the next throttle judges what was read
    again, calls, _ = answered(read_evidence(state, make_level(), T0 + 10), lambda _c: None)
    assert calls == [] and again == T0 - 2000


def test_the_read_teaches_the_shard_count() -> None:
    """A client all of whose writes are throttled never sees an ALL_NEW: the read is how
    it learns the entity doubled, and its next try goes to the new shard."""
    state = make_state()
    state.partition_wcu = WCU
    quiet = item(T0, FULL, shard_count=2)

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": quiet})
        shard = int(call.params["Key"]["PK"]["S"].rsplit("#", 1)[1])
        return throttle() if shard == 0 else ok(item(T0, FULL, shard_count=2))

    outcome, calls, slept = answered(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED), answer
    )
    assert isinstance(outcome, Taken) and outcome.shard_id == 1, calls
    assert slept == 0
    assert state.shard_count("e1", "gpt") == 2


def test_an_evidence_read_is_the_image_the_next_write_plans_from() -> None:
    """A window read for evidence shows the whole item: the client's next write to that
    shard (often one it never wrote: the second shard an entity's evidence reads) plans
    from it, with no read of its own."""
    state = make_state()
    state.partition_wcu = WCU
    state.entities["e1"].shards.counts["gpt"] = 2
    level = make_level(shard_count=2)
    shard1 = replace(level, shard_id=1)
    seen = item(T0, FULL, shard_count=2)
    _since, calls, _ = answered(read_evidence(state, shard1, T0), lambda _c: Result({"Item": seen}))
    assert [c.op for c in calls] == ["get_item"]
    outcome, calls, _ = answered(take(state, shard1, T0 + 50, True), lambda _c: ok(seen))
    assert isinstance(outcome, Taken)
    assert [c.op for c in calls] == ["update_item"]


def test_a_read_that_is_throttled_too_is_no_evidence() -> None:
    state = make_state()
    since, calls, _ = answered(read_evidence(state, make_level(), T0), lambda _c: throttle())
    assert since is None and [c.op for c in calls] == ["get_item"]
    # and it is not read again at once
    _, calls, _ = answered(
        read_evidence(state, make_level(), T0 + EVIDENCE_READ_MS - 1), lambda _c: throttle()
    )
    assert calls == []


def test_a_doubling_and_a_propagated_count_restart_the_window() -> None:
    key = keys.bucket_key("ns", "e1", "gpt", 1)
    for params in (
        keys.propagate_shard_count("t", key, 4, ["rpm"], now_ms=T0),
        keys.double_shards("t", key, 2, 4, T0, T0 - 1000, ["rpm"]),
    ):
        update = params["UpdateExpression"]
        assert "REMOVE wps, wpn" in update
        assert "ws" in str(params["ExpressionAttributeNames"].values()) or " ws = " in update


def test_a_lost_race_teaches_the_count_the_item_shows() -> None:
    """A write planned at the count this client knew fails on shard 0's new count: the
    client learns it from the ALL_OLD, so its next acquires spread over the shards instead
    of losing the same race on shard 0 again."""
    state = make_state()
    doubled = item(T0, FULL, shard_count=2)
    outcome, _log = drive(take(state, make_level(), T0, True), [failed(doubled), ok()])
    assert isinstance(outcome, Taken)
    assert state.shard_count("e1", "gpt") == 2


def test_on_an_entity_of_several_shards_one_hot_shard_is_not_enough() -> None:
    """An entity's acquires spread over its shards: one shard at its limit while another
    is quiet is a burst of its own (one client's reserve writes, returns falling due
    together), which a doubling of the whole entity would not relieve."""
    hot_window = WindowSeen(T0 - 2000, 30, T0, WCU, 2)
    quiet_window = WindowSeen(T0 - 2000, 2, T0, WCU, 2)
    for other, doubles in ((quiet_window, False), (hot_window, True)):
        state = two_shards(WCU, (hot_window, other))
        since, calls, _ = answered(
            entity_evidence(state, make_level(shard_count=2), T0), lambda _c: None
        )
        assert calls == []  # both windows were seen just now: nothing to read
        assert (since is not None) is doubles


def test_the_other_shard_is_read_when_its_window_is_not_known() -> None:
    state = make_state()
    state.partition_wcu = WCU
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 2
    meta.shards.seen[("gpt", 0)] = WindowSeen(T0 - 2000, 30, T0, WCU, 2)
    since, calls, _ = answered(
        entity_evidence(state, make_level(shard_count=2), T0),
        lambda _c: Result({"Item": _hot_item(shard_count=2)}),
    )
    assert [c.op for c in calls] == ["get_item"]
    assert calls[0].params["Key"]["PK"]["S"].endswith("#1")
    assert since == T0 - 2000


def test_lost_races_left_by_two_acquires_of_one_client_add_up() -> None:
    """Two acquires of a client shared by threads, in flight together, each lose a race and
    are throttled: the next good write counts both races, not the last one's alone."""
    state = make_state()
    old = item(T0 - 1000, FULL)
    first, second = (take(state, make_level(), T0, True) for _ in range(2))
    next(first), next(second)  # both write at once
    first.send(failed(old)), second.send(failed(old))  # both lose, and write again
    for flow in (first, second):
        with contextlib.suppress(RateLimiterUnavailable):
            flow.throw(throttle())
    _, log = drive(take(state, make_level(), T0 + 10, True), [ok()])
    assert counted(log[0]) == 3
