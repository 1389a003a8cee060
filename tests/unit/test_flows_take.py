"""The take() state machine (flows/write/take.py), driven with canned results."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import pytest

from tests.unit._flowkit import (
    KEY,
    LIMITS,
    NS,
    RPM,
    T0,
    TABLE,
    answered,
    drive,
    failed,
    item,
    limit_part,
    make_level,
    make_state,
    ok,
    recorded,
    shards_answer,
    value_of,
)
from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Result, Sleep, lockstep, run_pure
from zae_limiter.flows.context import Exhausted
from zae_limiter.flows.scaling.evidence import DOUBLING_THRESHOLD, EVIDENCE_SIGMAS, partition_bound
from zae_limiter.flows.scaling.knowledge import STALE_WINDOW_MS, WindowSeen
from zae_limiter.flows.write.levels import Level, Rejected, Taken
from zae_limiter.flows.write.memory import MAX_IMAGE_EPOCHS, local_rejection
from zae_limiter.flows.write.take import MAX_WRITE_ATTEMPTS, take
from zae_limiter.models import Entity


# ---------------------------------------------------------------- speculative path
def test_speculative_success_is_one_update() -> None:
    state = make_state()
    state.exhausted[("e1", "gpt")] = Exhausted(T0 - 1, {}, {})
    new = item(T0 - 5, {"rpm": 9000, "tpm": 900_000}, shard_count=3)
    outcome, log = drive(take(state, make_level(), T0, True), [ok(new)])
    assert outcome == Taken("e1", "gpt", 0, {"rpm": 1000, "tpm": 100_000}, LIMITS)
    [call] = log
    assert isinstance(call, Call) and call.op == "update_item"
    assert call.params["Key"] == KEY
    # its image shows nothing: planned as full (SET from now), the conditions decide
    assert limit_part(call.params, "rpm")[0] == "set"
    assert limit_part(call.params, "rpm")[1]["amount"] == T0 * 10_000 + 1000 * 60_000
    assert limit_part(call.params, "tpm")[1]["cap"] == 1_000_000
    # ALL_NEW taught the client the entity's facts and shard count; the shortage is forgotten
    assert state.entities["e1"].shards.counts == {"gpt": 3}
    assert ("e1", "gpt") not in state.exhausted


def test_speculative_condition_checks_undivided_stored_config() -> None:
    _, log = drive(take(make_state(), make_level(shard_count=4), T0, True), [ok()])
    params = log[0].params
    values = params["ExpressionAttributeValues"]
    assert (values[":cap_0"], values[":refill_0"], values[":period_0"]) == (
        keys.n(RPM.capacity_milli),
        keys.n(RPM.refill_amount_milli),
        keys.n(RPM.refill_period_ms),
    )
    # a take of a quarter share moves the full-at time by rp x count per millitoken
    assert limit_part(params, "rpm")[1]["amount"] == T0 * 10_000 + 1000 * 60_000 * 4
    assert values[":shards"] == keys.n(4)


def test_the_next_write_picks_its_form_from_the_last_image() -> None:
    state = make_state()
    drive(take(state, make_level(), T0, True), [ok(item(T0, {"rpm": 5000, "tpm": 900_000}))])
    _, log = drive(take(state, make_level(), T0 + 1000, True), [ok()])
    form, values = limit_part(log[0].params, "rpm")
    assert form == "add" and values["amount"] == 1000 * 60_000
    # 5.166 tokens now, 4.166 left over: half of it is headroom for other reserves
    assert values["bound"] == (T0 + 1000) * 10_000 + (9000 - 2083) * 60_000


def test_missing_bucket_is_created_full_minus_consumption() -> None:
    state = make_state()
    outcome, log = drive(take(state, make_level(), T0, True), [failed(None), ok()])
    assert isinstance(outcome, Taken)
    assert [c.op for c in log] == ["update_item", "put_item"]
    put = log[1].params
    assert put["ConditionExpression"] == "attribute_not_exists(#pk)"
    assert put["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    created = keys.decode_bucket(put["Item"])
    assert created.limits["rpm"].tokens(T0) == 9000
    assert created.limits["rpm"].total_consumed_milli == 1000
    assert created.limits["tpm"].tokens(T0) == 900_000
    assert keys.A_REFILL not in put["Item"] and "b_rpm_tk" not in put["Item"]
    assert put["Item"]["PK"] == KEY["PK"]


def test_created_shard_holds_its_share() -> None:
    state = make_state()
    level = make_level(shard_count=4)
    _, log = drive(take(state, level, T0, True), [failed(None), ok()])
    created = keys.decode_bucket(log[1].params["Item"])
    assert created.shard_count == 4
    # tokens are the shard's share; the stored config stays undivided
    assert created.limits["rpm"].tokens(T0, count=4) == 10_000 // 4 - 1000
    assert created.limits["rpm"].capacity_milli == 10_000


def test_without_an_image_the_first_write_reads_the_bucket_first() -> None:
    """A write planned blind could not name held counts of reserves taken before it, which
    may have expired and count as spent (flows/write/plan.py): it reads first, as it does when
    its image is older than MAX_IMAGE_EPOCHS."""
    too_old = T0 + (MAX_IMAGE_EPOCHS + 1) * keys.RESERVE_EPOCH_MS
    for state, now in ((make_state(known=False), T0), (make_state(), too_old)):
        stored = item(now, {"rpm": 9000, "tpm": 900_000})
        outcome, log = drive(take(state, make_level(), now, True), [Result({"Item": stored}), ok()])
        assert isinstance(outcome, Taken)
        assert [c.op for c in log] == ["get_item", "update_item"]
        assert log[0].params["Key"] == KEY


def test_an_image_of_the_last_epochs_is_still_planned_from() -> None:
    state = make_state()
    now = T0 + MAX_IMAGE_EPOCHS * keys.RESERVE_EPOCH_MS
    _, log = drive(take(state, make_level(), now, True), [ok()])
    assert [c.op for c in log] == ["update_item"]


def test_creating_for_an_unknown_entity_reads_its_meta_first() -> None:
    state = make_state(known=False)
    meta = keys.encode_entity(NS, Entity("e1", parent_id="org", cascade=True))
    outcome, log = drive(
        take(state, make_level(), T0, True),
        [Result({}), Result({"Item": meta}), ok()],
    )
    assert isinstance(outcome, Taken)
    assert [c.op for c in log] == ["get_item", "get_item", "put_item"]
    assert log[1].params["Key"] == keys.entity_key(NS, "e1")
    created = keys.decode_bucket(log[2].params["Item"])
    assert (created.cascade, created.parent_id) == (True, "org")
    assert state.entities["e1"].facts.parent_id == "org"


def test_a_confirmed_shortage_rejects_and_remembers() -> None:
    state = make_state()
    old = item(T0, {"rpm": 0, "tpm": 500_000})
    outcome, log = drive(take(state, make_level(), T0, True), [failed(old)])
    assert len(log) == 1  # no write
    assert isinstance(outcome, Rejected)
    assert outcome.retry_after_ms == 6000
    [violation] = outcome.violations
    assert (violation.entity_id, violation.resource, violation.limit_name) == ("e1", "gpt", "rpm")
    assert (violation.capacity, violation.available, violation.requested) == (10, 0, 1)
    assert violation.retry_after_seconds == 6.0
    memory = state.exhausted[("e1", "gpt")]
    assert memory.until_ms == T0 + 6000
    assert memory.limits["rpm"].tokens(T0) == 0


def test_sharded_rejection_is_not_remembered() -> None:
    state = make_state()
    old = item(T0, {"rpm": 0, "tpm": 500_000}, shard_count=2)
    outcome, _ = drive(take(state, make_level(shard_count=2), T0, True), [failed(old)])
    assert isinstance(outcome, Rejected)
    assert state.exhausted == {}


def test_a_request_local_rejection_lets_through_makes_a_request() -> None:
    state = make_state()
    old = item(T0, {"rpm": 0, "tpm": 1_000_000})
    first, _ = drive(take(state, make_level({"rpm": 2000}), T0, True), [failed(old)])
    assert isinstance(first, Rejected)
    level = make_level({"rpm": 1000})
    assert local_rejection(state, level, T0 + 6000) is None
    new = item(T0 + 6000, {"rpm": 0, "tpm": 1_000_000})
    outcome, log = drive(take(state, level, T0 + 6000, True), [ok(new)])
    assert isinstance(outcome, Taken)
    assert [c.op for c in log] == ["update_item"]
    assert ("e1", "gpt") not in state.exhausted  # success forgets the shortage


# ---------------------------------------------------------------- write-rate window
def test_a_window_is_counted_into_and_restarted_only_when_known_old() -> None:
    state = make_state()
    new = item(T0, {"rpm": 9000, "tpm": 900_000})
    # never seen: the client cannot know whether someone restarted it, so it only counts
    _, log = drive(take(state, make_level(), T0, True), [ok(new)])
    first = log[0].params["UpdateExpression"]
    assert "ws =" not in first and re.search(r"\bwn :writes\b", first)
    _, log = drive(take(state, make_level(), T0 + 500, True), [ok(new)])
    assert "ws =" not in log[0].params["UpdateExpression"]
    # seen recently and two seconds old: restart it
    _, log = drive(take(state, make_level(), T0 + keys.WINDOW_MS, True), [ok(new)])
    assert value_of(log[0].params, "ws =", "UpdateExpression") == T0 + keys.WINDOW_MS


def test_a_window_seen_long_ago_is_restarted_only_when_very_old() -> None:
    state = make_state()
    _, log = drive(take(state, make_level(), T0, True), [ok(item(T0, {"rpm": 9000}))])
    later = T0 + keys.WINDOW_MS + 1000  # the client's view is now stale
    _, log = drive(take(state, make_level(), later, True), [ok()])
    assert "ws =" not in log[0].params["UpdateExpression"]
    _, log = drive(take(state, make_level(), T0 + STALE_WINDOW_MS, True), [ok()])
    assert value_of(log[0].params, "ws =", "UpdateExpression") == T0 + STALE_WINDOW_MS


def _window(writes: int, span_ms: int, wcu: int = 1000) -> dict[str, Any]:
    hot = item(T0 - span_ms, {"rpm": 9000, "tpm": 900_000})
    hot["ws"] = {"N": str(T0 - span_ms)}
    hot["wn"] = {"N": str(writes)}
    hot["b_wcu_cp"] = {"N": str(wcu)}
    return hot


def test_a_hot_partition_asks_shard_zero_to_double() -> None:
    state = make_state()
    hot = _window(1800, 2000)  # 900 writes/s against 1000
    none_above = Result({"Responses": {TABLE: []}})  # no drained shard to delete first
    outcome, log = drive(take(state, make_level(), T0, True), [ok(hot), none_above, ok(hot)])
    assert isinstance(outcome, Taken)
    assert [c.op for c in log] == ["update_item", "batch_get_item", "update_item"]
    double = log[2].params
    assert double["Key"] == KEY
    assert double["ExpressionAttributeValues"][":shards"] == {"N": "1"}
    assert double["ExpressionAttributeValues"][":new_shards"] == {"N": "2"}
    # the evidence cited is the window's start: shard 0 refuses it if it predates a doubling
    assert double["ExpressionAttributeValues"][":measured_since"] == {"N": str(T0 - 2000)}
    # at most one try per client per window
    _, log = drive(take(state, make_level(), T0 + 100, True), [ok(hot)])
    assert len(log) == 1


def test_a_throttled_check_before_a_doubling_leaves_the_take_taken() -> None:
    """The read before a raise (flows/scaling/made.py) follows a good write: throttled, it
    is a check that did not pass, and the acquire keeps what it took. Raised, it failed
    that acquire after its tokens were taken, and a retry took them again (the
    simulator's seed 3733: tokens lost)."""
    state = make_state()
    hot = _window(1800, 2000)
    throttled = RateLimiterUnavailable("throttled", code="ProvisionedThroughputExceededException")
    answers = iter([ok(hot), throttled])
    outcome, calls, _slept = answered(
        take(state, make_level(), T0, True), lambda _call: next(answers)
    )
    assert isinstance(outcome, Taken)
    assert [c.op for c in calls] == ["update_item", "batch_get_item"]


@pytest.mark.parametrize(
    ("writes", "span_ms", "wcu", "hot"),
    [
        (1700, 2000, 1000, True),  # 850/s: at DynamoDB's scale a few percent decide
        (1660, 2000, 1000, False),  # 830/s: over 80%, but within chance of it
        (9, 2000, 5, False),  # 8 writes besides this one at 5/s: one window in eight
        (16, 2000, 5, True),  # past 8 + 2 x sqrt(8)
        (21, 4000, 5, False),  # 5/s over 4 s is not 2 sigmas past 4/s
        (56, 10_000, 5, True),  # a shard at its limit for 10 s is unmistakable
        (30, 900, 50, False),  # under a second: never evidence
    ],
)
def test_doubling_needs_significant_evidence(
    writes: int, span_ms: int, wcu: int, hot: bool
) -> None:
    seen = WindowSeen(T0 - span_ms, writes, T0, wcu)
    assert partition_bound(seen, DOUBLING_THRESHOLD, EVIDENCE_SIGMAS) is hot


def test_noise_at_half_the_limit_rarely_counts_as_evidence() -> None:
    """A shard at 2.5 writes/s with a 5/s limit: the chance that a 2 s window proves it hot
    (a Poisson tail) is far below the one in eight of a bare 80% line."""
    lam = 5.0  # writes expected in 2 s
    tail = 0.0
    for k in range(60):
        if partition_bound(
            WindowSeen(T0 - 2000, k + 1, T0, 5), DOUBLING_THRESHOLD, EVIDENCE_SIGMAS
        ):
            tail += math.exp(-lam) * lam**k / math.factorial(k)
    assert tail < 0.002
    bare = sum(math.exp(-lam) * lam**k / math.factorial(k) for k in range(8, 60))
    assert bare > 0.12


def test_a_failed_write_retries_on_all_old_without_reading() -> None:
    state = make_state()
    first = item(T0 - 30_000, {"rpm": 0, "tpm": 500_000})
    second = item(T0 - 12_000, {"rpm": 500, "tpm": 400_000})
    outcome, log = drive(
        take(state, make_level(), T0, True),
        [failed(first), failed(second), None, ok()],
    )
    assert isinstance(outcome, Taken)
    assert [type(step).__name__ for step in log] == ["Call", "Call", "Sleep", "Call"]
    assert [step.op for step in log if isinstance(step, Call)] == ["update_item"] * 3
    assert isinstance(log[2], Sleep) and 0 <= log[2].ms <= 200
    retry = log[3].params
    # 12 s brought 2 rpm tokens (2.5 now): an ADD of one token, bounded by the room
    form, values = limit_part(retry, "rpm")
    assert form == "add" and values["amount"] == 1000 * 60_000
    assert values["bound"] == T0 * 10_000 + (9000 - 750) * 60_000  # 1.5 left, half headroom


def test_a_write_from_memory_is_planned_at_the_count_the_client_knows() -> None:
    """A doubling keeps a shard's full-at times and raises its count; a client whose
    image of the shard predates it plans at the count it knows now, so its write does
    not fail on the count condition (measured: 90-150 such failures in a `reserve=False`
    run at 8x a partition, each also counted as a lost race in the windows that decide
    the next doubling). The amounts are the new count's share."""
    state = make_state()
    meta = state.entities["e1"]
    meta.images.items[("gpt", 0)] = item(T0 - 5_000, {"rpm": 4000, "tpm": 400_000}, shard_count=2)
    meta.images.at[("gpt", 0)] = T0 - 5_000
    meta.shards.counts["gpt"] = 4
    _, log = drive(take(state, make_level(shard_count=4), T0, True), [ok()])
    [call] = log
    assert call.params["ExpressionAttributeValues"][":shards"] == {"N": "4"}
    assert limit_part(call.params, "tpm")[1]["cap"] == 1_000_000  # the stored config


def test_a_shard_that_kept_the_old_count_fails_the_guess_and_all_old_decides() -> None:
    """A shard that has not recorded the doubling yet fails the write planned at the new
    count; the retry plans from its ALL_OLD at the count it records."""
    state = make_state()
    meta = state.entities["e1"]
    old = item(T0 - 5_000, {"rpm": 4000, "tpm": 400_000}, shard_count=2)
    meta.images.items[("gpt", 0)], meta.images.at[("gpt", 0)] = old, T0 - 5_000
    meta.shards.counts["gpt"] = 4
    outcome, log = drive(take(state, make_level(shard_count=4), T0, True), [failed(old), ok()])
    assert isinstance(outcome, Taken)
    writes = [step for step in log if isinstance(step, Call)]
    shards = [w.params["ExpressionAttributeValues"][":shards"]["N"] for w in writes]
    assert shards == ["4", "2"]


def test_a_write_that_lost_a_race_asks_for_no_reserve_again() -> None:
    level = replace(make_level(), hold_milli={"rpm": 2000})
    image = item(T0, {"rpm": 8000, "tpm": 800_000})
    _, log = drive(
        take(make_state(), level, T0, False),
        [Result({"Item": image}), failed(image), None, ok()],
    )
    first, retry = log[1].params, log[3].params
    # A reserve needs as much again behind: 8 held, less 1 taken, less 2 x 2 reserved
    # leaves 3, half of them headroom for other clients' reserves.
    assert limit_part(first, "rpm")[1]["bound"] == T0 * 10_000 + (10_000 - 5000 - 1500) * 60_000
    assert "#reserve0" in first["UpdateExpression"]
    assert limit_part(retry, "rpm")[1]["bound"] == T0 * 10_000 + (10_000 - 1000 - 3500) * 60_000
    assert "#reserve0" not in retry["UpdateExpression"]


def test_lost_create_race_continues_on_the_winner_item() -> None:
    state = make_state()
    winner = item(T0, {"rpm": 9000, "tpm": 900_000})
    outcome, log = drive(
        take(state, make_level(), T0, True),
        [failed(None), failed(winner), None, ok()],
    )
    assert isinstance(outcome, Taken)
    assert [getattr(step, "op", "sleep") for step in log] == [
        "update_item",
        "put_item",
        "sleep",
        "update_item",
    ]
    # The winner's item is short of full at T0: the take is an ADD.
    assert limit_part(log[3].params, "rpm")[0] == "add"


def test_contention_gives_up_after_max_attempts() -> None:
    old = item(T0 - 30_000, {"rpm": 0, "tpm": 500_000})
    results: list[Any] = [failed(old)]
    for _ in range(MAX_WRITE_ATTEMPTS):
        results += [failed(old), None]
    log: list[Any] = []
    with pytest.raises(RateLimiterUnavailable, match="contended"):
        run_pure(recorded(take(make_state(), make_level(), T0, True), log), results)
    writes = [s for s in log if isinstance(s, Call)]
    assert len(writes) == 1 + MAX_WRITE_ATTEMPTS


def test_non_speculative_reads_then_writes() -> None:
    old = item(T0 - 30_000, {"rpm": 0, "tpm": 500_000})
    outcome, log = drive(take(make_state(), make_level(), T0, False), [Result({"Item": old}), ok()])
    assert isinstance(outcome, Taken)
    assert [c.op for c in log] == ["get_item", "update_item"]
    assert log[0].params == {"TableName": TABLE, "Key": KEY, "ConsistentRead": True}
    assert limit_part(log[1].params, "rpm")[0] == "add"
    assert limit_part(log[1].params, "tpm")[0] == "set"  # 30 s refilled tpm to full


def test_prefetched_item_skips_the_speculative_write() -> None:
    old = item(T0 - 30_000, {"rpm": 0, "tpm": 500_000})
    _, log = drive(take(make_state(), make_level(), T0, True, prefetched=old), [ok()])
    assert [c.op for c in log] == ["update_item"]
    assert limit_part(log[0].params, "rpm")[0] == "add"
    _, log = drive(take(make_state(), make_level(), T0, True, prefetched=None), [ok()])
    assert [c.op for c in log] == ["put_item"]


# ---------------------------------------------------------------- lockstep of takes
def test_lockstep_of_take_flows_cascade_round_trip() -> None:
    state = make_state()
    meta = state.entities.learn("org", False, None)
    meta.images.items[("gpt", 0)], meta.images.at[("gpt", 0)] = {}, T0
    child = make_level()
    parent = Level("org", "gpt", LIMITS, {"rpm": 1000})
    exhausted_parent = item(T0, {"rpm": 0, "tpm": 1_000_000})
    flows = [take(state, child, T0, True), take(state, parent, T0, True)]
    value, requests = drive(
        lockstep(flows, stop=lambda v: isinstance(v, Rejected)),
        [(ok(), failed(exhausted_parent))],
    )
    assert len(requests) == 1 and len(requests[0]) == 2  # both speculative writes at once
    assert isinstance(value[0], Taken) and isinstance(value[1], Rejected)
    assert ("org", "gpt") in state.exhausted


# ---------------------------------------------------------------- split shards
def test_split_shard_copies_its_sibling_once_the_sibling_records_the_count() -> None:
    """After shard 0 doubled 1 -> 2, shard 1 is created from shard 0's full-at times.

    No token may be created, and none destroyed: shard 0 held 8 rpm tokens of its whole,
    pre-doubling share; at two shards it keeps 4, and shard 1 starts with 4.
    """
    state = make_state()
    state.entities["e1"].shards.counts["gpt"] = 2
    level = Level("e1", "gpt", LIMITS, {"rpm": 1000}, shard_id=1, shard_count=2)
    donor = item(T0, {"rpm": 8000, "tpm": 1_000_000}, shard_count=1)
    donor[keys.A_SHARD_COUNT] = keys.n(2)  # shard 0 doubled
    donor_before = keys.decode_bucket(donor)
    log: list[Any] = []
    flow = recorded(take(state, level, T0, True), log)
    # a shard this client never wrote is read, not written blind: it is absent
    first = next(flow)
    assert first.op == "get_item" and first.params["Key"]["PK"]["S"].endswith("#1")
    read = flow.send(Result({}))
    assert read.op == "get_item" and read.params["Key"] == KEY  # shard 0 is the donor
    put = flow.send(Result({"Item": donor}))
    # made in one transaction with a check that shard 0 still stands as read
    assert put.op == "transact_write_items"
    made, check = put.params["TransactItems"]
    assert check["ConditionCheck"]["Key"] == KEY
    assert check["ConditionCheck"]["ExpressionAttributeValues"] == {":shards": keys.n(2)}
    created = keys.decode_bucket(made["Put"]["Item"])
    assert created.shard_id == 1
    assert created.limits["rpm"].full_at == donor_before.limits["rpm"].full_at
    kept = donor_before.limits["rpm"].tokens(T0, count=2)
    assert kept + created.limits["rpm"].tokens(T0, count=2) == 8000


def test_a_donor_that_never_saw_the_doubling_records_it_first() -> None:
    state = make_state()
    state.entities["e1"].shards.counts["gpt"] = 4
    level = Level("e1", "gpt", LIMITS, {"rpm": 1000}, shard_id=3, shard_count=4)
    shard0 = item(T0, {"rpm": 10_000}, shard_count=4)
    sibling = item(T0, {"rpm": 4000}, shard_count=2)
    log: list[Any] = []
    flow = recorded(take(state, level, T0, True), log)
    read = next(flow)
    # A shard that may be unmade is read with shard 0 and its donor (shard 1), at once.
    assert read.op == "batch_get_item" and len(read.params["RequestItems"][TABLE]["Keys"]) == 3
    move = flow.send(shards_answer(read, {0: shard0, 1: sibling}))
    assert move.op == "update_item"
    values = move.params["ExpressionAttributeValues"]
    assert (values[":new_shards"], values[":shards"]) == (keys.n(4), keys.n(2))
    assert "#split_0 = if_not_exists(#full_at_0, :no_snapshot)" in move.params["UpdateExpression"]
    # Its window restarts: what it counted was meant for fewer shards (flows/scaling/split.py).
    assert f"{keys.A_WINDOW_START} = :now_ms" in move.params["UpdateExpression"]
    # ALL_NEW as DynamoDB returns it: the count and the snapshot of the full-at time; a
    # take on the sibling since (its fa moved on) is not the new shard's.
    fa = keys.limit_attr("rpm", "fa")
    recorded_count = {
        **sibling,
        keys.A_SHARD_COUNT: keys.n(4),
        keys.limit_attr("rpm", "sf"): sibling[fa],
        fa: keys.n(int(sibling[fa]["N"]) + 1000 * 60_000 * 4),
    }
    put = flow.send(ok(recorded_count))
    assert put.op == "transact_write_items"
    created = keys.decode_bucket(put.params["TransactItems"][0]["Put"]["Item"])
    assert created.limits["rpm"].tokens(T0, count=4) == 2000  # half of the sibling's 4


def test_a_write_knows_what_the_bucket_had_left_after_it() -> None:
    """ALL_NEW's tokens, refilled to the write's time (rpm: 1 token per 6 s, tpm: 1 per
    60 ms); a shard's figure is scaled to the entity by the shard count."""
    after = item(T0 - 12_000, {"rpm": 4000, "tpm": 500_000})
    outcome, _ = drive(take(make_state(), make_level(), T0, True), [ok(after)])
    assert isinstance(outcome, Taken)
    assert outcome.remaining() == {"rpm": 6, "tpm": 700}
    half = item(T0 - 12_000, {"rpm": 1000, "tpm": 100_000}, shard_count=2)
    outcome, _ = drive(take(make_state(), make_level(), T0, True), [ok(half)])
    assert isinstance(outcome, Taken)
    assert outcome.remaining() == {"rpm": 4, "tpm": 400}
    served = Taken("e1", "gpt", 0, {"rpm": 1000}, LIMITS, from_reserve=True)
    assert served.remaining() is None  # no write: nothing seen


def test_a_take_on_a_shard_a_merge_drained_goes_to_its_receiver() -> None:
    """A client that still knows 2 shards writes shard 1 after a 2 -> 1 merge drained it:
    the write fails on the count, and ALL_OLD shows shard 1 retired (its count, 1, at or
    below its id) and refilled once the merge's freeze ended. Its share went to shard 0:
    the take goes there, planned at the count shard 0 records, never to the drained item
    (which, planned at count 1, would hold a whole bucket; fault simulator seeds 7808 and
    8545)."""
    state = make_state()
    meta = state.entities["e1"]
    before = item(T0 - 5_000, {"rpm": 4000, "tpm": 400_000}, shard_count=2)
    meta.images.items[("gpt", 1)], meta.images.at[("gpt", 1)] = before, T0 - 5_000
    meta.shards.counts["gpt"] = 2
    drained = item(T0 - 1_000, {"rpm": 9000, "tpm": 900_000})  # count 1, refilled
    level = replace(make_level(shard_count=2), shard_id=1)
    outcome, log = drive(take(state, level, T0, True), [failed(drained), ok()])
    assert isinstance(outcome, Taken) and outcome.shard_id == 0
    first, then = log
    assert first.params["Key"]["PK"]["S"].endswith("#1")
    assert then.params["Key"]["PK"]["S"].endswith("#0")
    assert then.params["ExpressionAttributeValues"][":shards"] == {"N": "1"}


def test_a_remembered_drained_shard_is_not_taken_from_either() -> None:
    """A client whose own image of shard 1 shows it drained (count 1, at its id) and is
    routed there again (a doubling it tried after a throttle, which that drained shard
    stopped, still sends it to shard 1) plans from that image: once the merge's freeze is
    over the shard has refilled, and a write planned there would pass its conditions.
    The take goes to the receiver, with no write to shard 1 (fault simulator's `redouble`
    focus, seed 2439: 1.9 tokens over)."""
    state = make_state()
    meta = state.entities["e1"]
    drained = item(T0 - 70_000, {"rpm": 9000, "tpm": 900_000})  # count 1: a merge drained it
    meta.images.items[("gpt", 1)], meta.images.at[("gpt", 1)] = drained, T0 - 10_000
    meta.shards.counts["gpt"] = 2
    level = replace(make_level(shard_count=2), shard_id=1)
    outcome, log = drive(take(state, level, T0, True), [ok()])
    assert isinstance(outcome, Taken) and outcome.shard_id == 0
    assert [call.params["Key"]["PK"]["S"][-2:] for call in log] == ["#0"]
