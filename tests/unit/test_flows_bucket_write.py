"""Bucket-write arithmetic (flows/bucket_write.py): plans, rejections, local memory."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit._flowkit import (
    KEY,
    NS,
    RPM,
    T0,
    TABLE,
    TPM,
    bucket,
    make_level,
    make_state,
    value_of,
)
from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows.bucket_write import (
    Level,
    Rejected,
    WritePlan,
    donor_of,
    effective,
    learn,
    local_rejection,
    new_bucket,
    plan_write,
    read_shares,
    remember,
    shares_held,
)
from zae_limiter.flows.context import Exhausted, RepoState
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState


# ---------------------------------------------------------------- plan_write rejections
def test_refill_that_does_not_help_is_a_rejection_with_memory() -> None:
    stored = bucket(T0, {"rpm": 0, "tpm": 500_000})
    outcome = plan_write(stored, make_level(), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    assert outcome.retry_after_ms == 6000
    [violation] = outcome.violations
    assert (violation.entity_id, violation.resource, violation.limit_name) == ("e1", "gpt", "rpm")
    assert (violation.capacity, violation.available, violation.requested) == (10, 0, 1)
    assert violation.retry_after_seconds == 6.0
    assert violation.exceeded
    assert outcome.memory is not None
    assert outcome.memory.until_ms == T0 + 6000
    assert outcome.memory.last_refill_ms == T0
    assert outcome.memory.limits["rpm"].tokens_milli == 0
    assert outcome.memory.limits["tpm"].tokens_milli == 500_000


def test_rejection_lists_every_violated_limit_and_the_longest_wait() -> None:
    stored = bucket(T0, {"rpm": 500, "tpm": 0})
    outcome = plan_write(stored, make_level({"rpm": 2000, "tpm": 300_000}), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    by_name = {v.limit_name: v for v in outcome.violations}
    assert set(by_name) == {"rpm", "tpm"}
    assert (by_name["rpm"].available, by_name["rpm"].requested) == (0, 2)
    assert (by_name["tpm"].available, by_name["tpm"].requested) == (0, 300)
    assert by_name["rpm"].retry_after_seconds == 9.0  # 1.5 tokens at 1 per 6 s
    assert by_name["tpm"].retry_after_seconds == 18.0  # 300 tokens at 1000/min
    assert outcome.retry_after_ms == 18_000
    assert outcome.memory is not None and outcome.memory.until_ms == T0 + 18_000


def test_refill_up_to_now_is_counted_before_rejecting() -> None:
    stored = bucket(T0 - 3000, {"rpm": 500, "tpm": 0})  # 3 s bring half a token
    outcome = plan_write(stored, make_level({"rpm": 1000}), T0, TABLE, KEY)
    assert isinstance(outcome, WritePlan)
    assert value_of(outcome.params, "b_rpm_tk", "UpdateExpression") == 500 - 1000  # gain - need
    outcome = plan_write(stored, make_level({"rpm": 2000}), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    assert outcome.retry_after_ms == 6000


def test_debt_blocks_even_an_unconsumed_limit() -> None:
    stored = bucket(T0, {"rpm": 10_000, "tpm": -3000})
    outcome = plan_write(stored, make_level({"rpm": 1000}), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    assert [v.limit_name for v in outcome.violations] == ["tpm"]
    assert outcome.violations[0].available == -3


# ---------------------------------------------------------------- memory and local rejection
def _exhaust(state: RepoState, need_rpm: int, shard_count: int = 1) -> Rejected:
    level = make_level({"rpm": need_rpm}, shard_count=shard_count)
    stored = bucket(T0, {"rpm": 0, "tpm": 1_000_000}, shard_count=shard_count)
    outcome = plan_write(stored, level, T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    remember(state, level, outcome)
    return outcome


def test_local_rejection_before_until_rejects_only_what_cannot_fit() -> None:
    state = make_state()
    first = _exhaust(state, 2000)  # two tokens: 12 s away
    assert first.retry_after_ms == 12_000
    assert state.exhausted[("e1", "gpt")] == first.memory
    # 6 s later one token has come back: a one-token request fits and goes to DynamoDB
    assert local_rejection(state, make_level({"rpm": 1000}), T0 + 6000) is None
    assert local_rejection(state, make_level({"tpm": 5000}), T0 + 6000) is None
    again = local_rejection(state, make_level({"rpm": 2000}), T0 + 6000)
    assert isinstance(again, Rejected)
    assert again.memory is None
    [violation] = again.violations
    assert (violation.available, violation.requested) == (1, 2)
    assert again.retry_after_ms == 6000
    # a clock a little behind the one that saw the shortage predicts no refill at all
    behind = local_rejection(state, make_level({"rpm": 1000}), T0 - 1000)
    assert isinstance(behind, Rejected)
    # memory is kept until it expires, then forgotten
    assert ("e1", "gpt") in state.exhausted
    assert local_rejection(state, make_level({"rpm": 2000}), T0 + 12_000) is None
    assert ("e1", "gpt") not in state.exhausted


def test_memory_is_per_entity_and_resource() -> None:
    state = make_state()
    _exhaust(state, 2000)
    other_resource = Level("e1", "other", (RPM, TPM), {"rpm": 2000})
    other_entity = Level("e2", "gpt", (RPM, TPM), {"rpm": 2000})
    assert local_rejection(state, other_resource, T0 + 1) is None
    assert local_rejection(state, other_entity, T0 + 1) is None


def test_a_sharded_shortage_is_not_remembered() -> None:
    state = make_state()
    _exhaust(state, 1000, shard_count=2)
    assert state.exhausted == {}


def test_learn_forgets_the_shortage_and_learns_entity_facts() -> None:
    state = make_state(known=False)
    _exhaust(state, 2000)
    attributes = keys.new_bucket_item(
        NS, replace(bucket(T0, {"rpm": 0}, shard_count=4), cascade=True, parent_id="org")
    )
    learn(state, make_level(), attributes)
    assert ("e1", "gpt") not in state.exhausted
    meta = state.entities["e1"]
    assert (meta.cascade, meta.parent_id) == (True, "org")
    assert meta.shard_counts == {"gpt": 4}


def test_learn_without_attributes_changes_nothing() -> None:
    state = make_state(known=False)
    _exhaust(state, 2000)
    learn(state, make_level(), {})
    assert ("e1", "gpt") in state.exhausted
    assert state.entities == {}


def test_local_rejection_without_memory_is_none() -> None:
    assert local_rejection(make_state(), make_level(), T0) is None


@st.composite
def memories(draw: st.DrawFn) -> tuple[LimitState, int]:
    cp = draw(st.integers(1000, 10**9))
    state = LimitState(
        draw(st.integers(-cp, cp)),
        cp,
        draw(st.integers(1, 10**9)),
        draw(st.integers(1, 86_400_000)),
    )
    return state, draw(st.integers(0, 10**13))


@settings(max_examples=200, deadline=None)
@given(memories(), st.integers(0, 10**8), st.data())
def test_local_rejection_agrees_with_the_bucket_math(
    memory: tuple[LimitState, int], elapsed: int, data: st.DataObject
) -> None:
    seen, last = memory
    need = data.draw(st.integers(1, seen.capacity_milli), label="need")
    state = make_state()
    until = last + 10**9
    state.exhausted[("e1", "gpt")] = Exhausted(until, last, {"rpm": seen})
    now = last + elapsed
    level = make_level({"rpm": need}, limits=(RPM,))
    outcome = local_rejection(state, level, now)
    available = seen.refilled(last, now).tokens_milli
    if available >= need:
        assert outcome is None  # never reject what the predicted tokens cover
    else:
        assert isinstance(outcome, Rejected)
        # the advertised wait is enough, and not more than needed
        later = now + outcome.retry_after_ms
        assert seen.refilled(last, later).tokens_milli >= need
        assert seen.refilled(last, later - 1).tokens_milli < need


# ---------------------------------------------------------------- plan_write
def test_plan_write_sets_a_new_limit_full_minus_consumption() -> None:
    stored = bucket(T0 - 12_000, {"rpm": 5000})  # tpm is new to this item
    plan = plan_write(stored, make_level(), T0, TABLE, KEY)
    assert isinstance(plan, WritePlan)
    params = plan.params
    assert value_of(params, "b_tpm_tk =", "UpdateExpression") == 1_000_000 - 100_000
    assert value_of(params, "b_tpm_tc =", "UpdateExpression") == 100_000
    assert value_of(params, "b_tpm_cp =", "UpdateExpression") == 1_000_000
    add = params["UpdateExpression"].split(" ADD ", 1)[1]
    assert "b_tpm" not in add  # SET whole, never ADDed in the same expression
    assert (
        value_of(params, "b_rpm_tk", "UpdateExpression") == 2000 - 1000
    )  # 12 s of refill, less 1 token
    assert "b_tpm_tk >=" not in params["ConditionExpression"]


def test_plan_write_never_moves_rf_backwards() -> None:
    stored = bucket(T0 + 5000, {"rpm": 5000, "tpm": 0})
    plan = plan_write(stored, make_level({"rpm": 1000}), T0, TABLE, KEY)
    assert isinstance(plan, WritePlan)
    # Nothing refilled: rf is neither moved nor fenced, the write is a plain guarded ADD.
    assert ":rf" not in plan.params["ExpressionAttributeValues"]
    assert "#rf = :rf" not in plan.params["UpdateExpression"]
    assert value_of(plan.params, "b_rpm_tk", "UpdateExpression") == -1000


def test_plan_write_brings_tokens_down_to_a_lowered_capacity() -> None:
    stored = bucket(T0, {"rpm": 10_000, "tpm": 1_000_000})
    smaller = (Limit.per_minute("rpm", 4), TPM)
    plan = plan_write(stored, make_level({"rpm": 1000}, limits=smaller), T0, TABLE, KEY)
    assert isinstance(plan, WritePlan)
    assert value_of(plan.params, "b_rpm_tk", "UpdateExpression") == 4000 - 10_000 - 1000
    assert value_of(plan.params, "b_rpm_cp =", "UpdateExpression") == 4000


# ---------------------------------------------------------------- new buckets and shares
def test_new_bucket_is_full_minus_consumption_with_undivided_config() -> None:
    created = new_bucket(make_level(shard_count=4), T0, 900)
    assert created.last_refill_ms == T0
    assert created.shard_count == 4
    assert created.partition_wcu == 900
    assert created.limits["rpm"] == LimitState(10_000 // 4 - 1000, 10_000, 10_000, 60_000, 1000)
    assert created.limits["tpm"] == LimitState(
        1_000_000 // 4 - 100_000, 1_000_000, 1_000_000, 60_000, 100_000
    )


def test_new_split_shard_holds_the_tokens_given() -> None:
    created = new_bucket(make_level({}), T0, 1000, {"rpm": 1234})
    assert created.limits["rpm"].tokens_milli == 1234
    assert created.limits["tpm"].tokens_milli == 0


def test_effective_divides_application_limits_but_never_to_zero() -> None:
    assert effective(RPM, 1) == LimitState(0, 10_000, 10_000, 60_000)
    assert effective(RPM, 4) == LimitState(0, 2500, 2500, 60_000)
    tiny = Limit.per_minute("one", 1)
    assert effective(tiny, 4096) == LimitState(0, 1, 1, 60_000)


# ---------------------------------------------------------------- shares not yet split off
def _shards(count: int, present: list[int]) -> list[BucketState]:
    return [BucketState("e", "r", i, count, T0, {}) for i in present]


def test_each_shard_holds_the_shares_of_the_shards_not_yet_made_from_it() -> None:
    assert [donor_of(k) for k in range(1, 8)] == [0, 0, 1, 0, 1, 2, 3]
    assert shares_held(_shards(1, [0])) == {0: 1}
    assert shares_held(_shards(4, [0, 1, 2, 3])) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert shares_held(_shards(4, [0, 1])) == {0: 2, 1: 2}  # just doubled from 2
    assert shares_held(_shards(4, [0])) == {0: 4}
    # Shard 6's donor (2) was never made, so 6 took from shard 0; 2 and 4 are still there.
    assert shares_held(_shards(8, [0, 1, 3, 5, 6, 7])) == {0: 3, 1: 1, 3: 1, 5: 1, 6: 1, 7: 1}
    # A missing donor's share goes to shard 0, as create_split_shard takes it.
    assert shares_held(_shards(8, [0, 1, 3])) == {0: 4, 1: 2, 3: 2}
    assert shares_held(_shards(2, [1])) == {1: 1}  # no shard 0: nothing to go by


def test_reads_measure_a_shard_in_shard_zeros_shares() -> None:
    stale = [replace(b, shard_count=2) if b.shard_id else b for b in _shards(4, [0, 1])]
    counted = read_shares(stale)  # shard 1 has not seen the doubling to 4 yet
    assert [(b.shard_id, b.shard_count, n) for b, n in counted] == [(0, 4, 2), (1, 4, 2)]
    merging = _shards(2, [0]) + _shards(4, [1, 2, 3])[0:3]  # shards 2, 3: beyond the count
    counted = read_shares(merging)
    assert [(b.shard_id, b.shard_count, n) for b, n in counted] == [
        (0, 2, 1), (1, 2, 1), (2, 4, 1), (3, 4, 1),
    ]  # fmt: skip
    assert sum(shares_held(_shards(8, [0, 5])).values()) == 8
