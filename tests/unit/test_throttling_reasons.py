"""A throttle's reasons say whose limit refused a write (DynamoDB's ThrottlingReasons).

A reason naming the shard's partition (`...KeyRangeThroughputExceeded`) is proof that the
partition is the bottleneck: the acquire doubles at once, with no write-rate window that
proves it (at a few writes a second per partition, a window takes seconds to). A reason
naming the table's limit rules a doubling out, whatever the windows say: more shards
would only add writes. A throttle with no reason is judged from the windows, as before.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit._flowkit import (
    T0,
    answered,
    item,
    made_below,
    make_level,
    make_state,
    ok,
    shards_answer,
    two_shards,
)
from zae_limiter.errors import (
    TABLE_WRITE_KEY_RANGE,
    TABLE_WRITE_PROVISIONED,
    RateLimiterUnavailable,
    map_client_error,
    throttling_reasons,
)
from zae_limiter.flows import Call, Result
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling.any_shard import take_any_shard
from zae_limiter.flows.scaling.evidence import REFUSAL_PROOF_MS, entity_evidence
from zae_limiter.flows.scaling.knowledge import WindowSeen
from zae_limiter.flows.write.levels import Taken
from zae_limiter.flows.write.take import NOT_FETCHED

WCU = 50
FULL = {"rpm": 9000, "tpm": 900_000}
PTEE = "ProvisionedThroughputExceededException"


def throttle(*reasons: str) -> RateLimiterUnavailable:
    return RateLimiterUnavailable("throttled", code=PTEE, reasons=reasons)


def state_with(hot_window: bool) -> RepoState:
    state = make_state()
    state.partition_wcu = WCU
    if hot_window:  # 50/s over 2 s: the partition's whole limit, proven by the window
        meta = state.entities["e1"]
        meta.shards.seen[("gpt", 0)] = WindowSeen(T0 - 2100, 100, T0 - 100, WCU, 1)
    return state


def doublings(calls: list[Call]) -> list[dict[str, Any]]:
    return [
        c.params["ExpressionAttributeValues"]
        for c in calls
        if c.op == "update_item" and ":new_shards" in c.params.get("ExpressionAttributeValues", {})
    ]


def run_once_throttled(state: RepoState, error: RateLimiterUnavailable) -> tuple[Any, list[Call]]:
    """One acquire on a one-shard entity whose first write is refused with `error`; every
    later call goes through (reads find shard 0 as it was, with one shard)."""
    before = item(T0 - 5000, FULL)
    first = [True]

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": before})
        if call.op == "batch_get_item":  # shard 0 confirmed, shard 1 never made
            return shards_answer(call, {0: before})
        if first[0]:
            first[0] = False
            return error
        return ok(item(T0, FULL, shard_count=2))

    outcome, calls, _slept = answered(
        take_any_shard(state, make_level(), T0, True, NOT_FETCHED), answer
    )
    return outcome, calls


def test_a_throttle_that_names_the_partition_doubles_without_a_window() -> None:
    """No window: without the reason, the client could not tell (and did not double)."""
    state = state_with(hot_window=False)
    outcome, calls = run_once_throttled(state, throttle(TABLE_WRITE_KEY_RANGE))
    assert isinstance(outcome, Taken)
    sent = doublings(calls)
    assert len(sent) == 1, "a partition's refusal is proof enough to double"
    doubling = sent[0]
    assert doubling[":new_shards"] == {"N": "2"}
    # The evidence dates from the partition's last second: shard 0 refuses it if the
    # entity doubled since (another client's doubling for the same full partition).
    assert int(doubling[":measured_since"]["N"]) == T0 - REFUSAL_PROOF_MS


def test_a_throttle_with_no_reason_and_no_window_does_not_double() -> None:
    state = state_with(hot_window=False)
    outcome, calls = run_once_throttled(state, throttle())
    assert isinstance(outcome, Taken)
    assert doublings(calls) == []


def test_a_throttle_that_names_the_table_never_doubles_even_on_a_hot_window() -> None:
    """The window alone would prove the partition full; the reason says it was the
    table's capacity that refused the write, and no window is even read."""
    state = state_with(hot_window=True)
    outcome, calls = run_once_throttled(state, throttle(TABLE_WRITE_PROVISIONED))
    assert isinstance(outcome, Taken)
    assert doublings(calls) == []
    assert [c.op for c in calls] == ["update_item", "update_item"]  # no evidence read
    assert not state.entities["e1"].shards.tried


def test_the_same_hot_window_doubles_when_the_throttle_gives_no_reason() -> None:
    """The control for the test above: it is the reason, not the window, that held back."""
    state = state_with(hot_window=True)
    _outcome, calls = run_once_throttled(state, throttle())
    assert len(doublings(calls)) == 1


@pytest.mark.parametrize(
    ("reasons", "partition"),
    [
        ((), None),
        ((TABLE_WRITE_KEY_RANGE,), True),
        (("IndexWriteKeyRangeThroughputExceeded",), True),
        ((TABLE_WRITE_PROVISIONED,), False),
        (("TableWriteAccountLimitExceeded",), False),
        (("TableWriteMaxOnDemandThroughputExceeded",), False),
        ((TABLE_WRITE_PROVISIONED, TABLE_WRITE_KEY_RANGE), True),
    ],
)
def test_whose_limit_a_throttle_names(reasons: tuple[str, ...], partition: bool | None) -> None:
    error = map_client_error(PTEE, "slow down", reasons=reasons)
    assert isinstance(error, RateLimiterUnavailable) and error.throttled
    assert error.reasons == reasons
    assert error.partition_throttled is partition


def test_reasons_of_anything_but_a_throttle_say_nothing() -> None:
    error = RateLimiterUnavailable("boom", code="InternalServerError", reasons=("x",))
    assert error.partition_throttled is None


@pytest.mark.parametrize("member", ["ThrottlingReasons", "throttlingReasons"])
def test_reasons_are_read_from_either_spelling(member: str) -> None:
    response = {
        "Error": {"Code": PTEE},
        member: [
            {"reason": TABLE_WRITE_KEY_RANGE, "resource": "arn:aws:dynamodb:::table/t"},
            {"resource": "no reason"},
        ],
    }
    assert throttling_reasons(response) == (TABLE_WRITE_KEY_RANGE,)
    assert throttling_reasons({"Error": {"Code": PTEE}}) == ()
    assert throttling_reasons({member: "not a list"}) == ()


def test_on_an_entity_of_several_shards_a_refusal_is_no_proof_the_windows_decide() -> None:
    """A refusal on one shard of many is as likely a burst as a count too low for the
    load: the windows judge it, as for a throttle with no reason (both shards hot:
    doubles; the other quiet: does not), though DynamoDB named the partition."""
    hot = WindowSeen(T0 - 2000, 120, T0, WCU, 2)
    quiet = WindowSeen(T0 - 2000, 2, T0, WCU, 2)
    for own, other, doubles in ((quiet, quiet, False), (hot, quiet, False), (hot, hot, True)):
        state = two_shards(WCU, (own, other))
        since, calls, _ = answered(
            entity_evidence(state, make_level(shard_count=2), T0, True), lambda _c: None
        )
        assert calls == []  # both windows were seen just now: nothing to read
        assert (since is not None) is doubles
        if doubles:
            assert since == T0 - 2000  # the windows' evidence, not the refusals'


def test_on_a_one_shard_entity_the_reason_decides_before_any_window() -> None:
    """The partition's refusal: proof dated a second back, nothing read. The table's: no
    evidence, nothing read, even on a hot window. No reason: the window decides."""
    for partition, hot, expected in (
        (True, False, T0 - REFUSAL_PROOF_MS),
        (False, True, None),
        (None, True, T0 - 2100),
        (None, False, "read"),
    ):
        state = state_with(hot_window=hot)
        since, calls, _ = answered(
            entity_evidence(state, make_level(), T0, partition),
            lambda _c: Result({"Item": item(T0 - 5000, FULL)}),
        )
        if expected == "read":  # no reason, no window: the shard is read, and is quiet
            assert since is None and [c.op for c in calls] == ["get_item"]
        else:
            assert since == expected and calls == []


@pytest.mark.parametrize("shards_refused", [1, 2])
def test_refusals_named_on_two_shards_of_one_acquire_prove_the_count_too_low(
    shards_refused: int,
) -> None:
    """On an entity of several shards, one refusal may be a burst on its shard; an
    acquire whose writes two partitions refused by name meets a count too low for the
    load: it doubles with no window to prove it (at a few writes a second, windows take
    seconds to, while every partition refuses). Refused on one shard only, the windows
    decide (a quiet one here: no doubling)."""
    state = make_state()
    state.partition_wcu = WCU
    state.entities["e1"].shards.counts["gpt"] = 2
    quiet = item(T0 - 5000, FULL, shard_count=2)
    refusals = [0]

    def answer(call: Call) -> Any:
        if call.op == "get_item":
            return Result({"Item": quiet})
        if call.op == "batch_get_item":  # shard 1 is made: the raise may go
            return made_below(call)
        if ":new_shards" in call.params.get("ExpressionAttributeValues", {}):
            return ok(item(T0, FULL, shard_count=4))  # the doubling
        if refusals[0] < 2:
            refusals[0] += 1
            shard = int(call.params["Key"]["PK"]["S"].rsplit("#", 1)[1])
            return throttle(TABLE_WRITE_KEY_RANGE) if shard_refuses(shard) else ok(quiet)
        return ok(quiet)

    def shard_refuses(shard: int) -> bool:
        return shards_refused == 2 or refusals[0] == 1

    outcome, calls, _slept = answered(
        take_any_shard(state, make_level(shard_count=2), T0, True, NOT_FETCHED), answer
    )
    assert isinstance(outcome, Taken)
    found = [d for d in doublings(calls) if ":measured_since" in d]  # not a count told to a shard
    if shards_refused == 2:
        assert len(found) == 1 and found[0][":measured_since"] == {"N": str(T0 - REFUSAL_PROOF_MS)}
    else:
        assert found == []
