"""Planning one bucket write (flows/write/plan.py), shares (flows/write/shares.py) and the client's
memory (flows/write/memory.py): forms, bounds, rejections, local rejections."""

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
    limit_part,
    make_level,
    make_state,
)
from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.flows.context import Exhausted, RepoState
from zae_limiter.flows.write.levels import Level, Rejected, WritePlan
from zae_limiter.flows.write.memory import learn, local_rejection, remember
from zae_limiter.flows.write.plan import new_bucket, plan_write
from zae_limiter.flows.write.shares import donor_of, read_shares, shares_held, stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

UNIT = 60_000  # full-at units per millitoken of RPM and TPM (rp x count, count 1)


def _plan(stored: BucketState, level: Level, now: int = T0, confirmed: bool = True) -> WritePlan:
    plan = plan_write(stored, level, now, TABLE, KEY, confirmed=confirmed)
    assert isinstance(plan, WritePlan)
    return plan


# ---------------------------------------------------------------- forms
def test_a_bucket_short_of_full_is_taken_with_a_bounded_add() -> None:
    stored = bucket(T0, {"rpm": 4000, "tpm": 1_000_000})
    plan = _plan(stored, make_level({"rpm": 1000}))
    form, v = limit_part(plan.params, "rpm")
    assert form == "add"
    assert v["amount"] == 1000 * UNIT
    now_ra = T0 * 10_000
    assert v["now"] == now_ra
    # the take leaves 3 tokens; half of them are headroom for reserves other clients take
    # meanwhile (the held count may grow by 1.5 tokens), so the full-at time may be at
    # most 10 - 1 - 1.5 tokens ahead
    assert v["bound"] == now_ra + (10_000 - 1000 - 1500) * UNIT
    epoch = keys.reserve_epoch(T0)
    names = plan.params["ExpressionAttributeNames"]
    # every epoch a count may have been raised in since the image: from the one before
    # it to the one after now (plan.watched_epochs)
    watched = [names[f"#held{j}_0"] for j in range(3)]
    assert watched == [keys.reserve_attr("rpm", e) for e in (epoch + 1, epoch, epoch - 1)]
    assert plan.params["ExpressionAttributeValues"][":held1_0"] == {"N": "1500"}
    assert v["used"] == 1000
    assert "#full_at_0 > :now_0" in plan.params["ConditionExpression"]


def test_a_full_bucket_is_taken_with_a_set_from_now() -> None:
    stored = bucket(T0 - 10**6, {"rpm": 10_000, "tpm": 1_000_000})  # full long ago
    plan = _plan(stored, make_level({"rpm": 1000}))
    form, v = limit_part(plan.params, "rpm")
    assert form == "set"
    assert v["amount"] == T0 * 10_000 + 1000 * UNIT
    assert "b" not in v
    # tpm is not consumed here: a check that it is not in debt, nothing written
    form, v = limit_part(plan.params, "tpm")
    assert form == "check"
    assert v["bound"] == T0 * 1_000_000 + (1_000_000 - 500_000) * UNIT  # half is headroom


def test_a_reserve_leaves_through_the_held_count_and_needs_as_much_again_behind() -> None:
    stored = bucket(T0, {"rpm": 10_000, "tpm": 1_000_000})
    level = replace(make_level({"rpm": 1000}), hold_milli={"rpm": 3000})
    plan = _plan(stored, level)
    assert plan.held_milli == {"rpm": 3000}
    form, v = limit_part(plan.params, "rpm")
    assert form == "set" and v["amount"] == T0 * 10_000 + 1000 * UNIT  # the take only
    held = keys.reserve_attr("rpm", keys.reserve_epoch(T0))
    names = plan.params["ExpressionAttributeNames"]
    [slot] = [k for k, a in names.items() if a == held and k.startswith("#reserve")]
    value = ":reserve" + slot[len("#reserve") :]
    assert plan.params["ExpressionAttributeValues"][value] == {"N": "3000"}
    # the held counts enter the condition by value
    assert "#held0_0 <= :held0_0" in plan.params["ConditionExpression"]


def test_a_reserve_on_a_bucket_short_of_full_is_bounded_twice() -> None:
    stored = bucket(T0, {"rpm": 9000, "tpm": 1_000_000})
    level = replace(make_level({"rpm": 1000}), hold_milli={"rpm": 3000})
    form, v = limit_part(_plan(stored, level).params, "rpm")
    assert form == "add"
    # after the write: room 10 - 3 held, deficit 1 + 1 taken, 3 must stay behind, and
    # half of the 2 left over is headroom for other clients' reserves
    assert v["bound"] == T0 * 10_000 + (10_000 - 3000 - 3000 - 1000 - 1000) * UNIT


def test_a_flush_moves_spent_tokens_from_the_held_count_to_the_full_at_time() -> None:
    epoch = keys.reserve_epoch(T0)
    stored = replace(bucket(T0, {"rpm": 5000, "tpm": 1_000_000}), reserved={"rpm": {epoch: 4000}})
    flush = keys.Flush({"rpm": 2000}, {epoch: {"rpm": 2000}})
    level = replace(make_level({"rpm": 1000}), flush=flush)
    plan = _plan(stored, level)
    form, v = limit_part(plan.params, "rpm")
    assert form == "add"
    assert v["amount"] == 3000 * UNIT and v["used"] == 3000
    # the flush itself changes no tokens: 1 token there (room 10 - 4 held, 5 short), the
    # take leaves none, so no headroom either: the held count goes down by 2, the deficit
    # up by 1 + 2, and the bound is the take's alone
    assert v["bound"] == T0 * 10_000 + (10_000 - 4000 + 2000 - 3000) * UNIT


def test_an_unconfirmed_image_never_rejects_the_conditions_do() -> None:
    stored = bucket(T0, {"rpm": 0, "tpm": 1_000_000})
    plan = _plan(stored, make_level({"rpm": 1000}), confirmed=False)
    form, v = limit_part(plan.params, "rpm")
    assert form == "add"
    full_at = stored.limits["rpm"].full_at
    assert full_at is not None and full_at > v["bound"]  # it fails, and ALL_OLD decides


def test_a_changed_config_is_rebased_under_exactly_what_was_read() -> None:
    stored = bucket(T0, {"rpm": 10_000, "tpm": 1_000_000})
    smaller = (Limit.per_minute("rpm", 4), TPM)
    plan = _plan(stored, make_level({"rpm": 1000}, limits=smaller))
    form, v = limit_part(plan.params, "rpm")
    assert form == "rebase"
    assert v["cap"] == 4000
    # 4 tokens at most under the new capacity, one taken: 1 token short of full
    assert v["amount"] == T0 * 4000 + 1000 * 60_000
    assert v["was_full_at"] == stored.limits["rpm"].full_at


def test_a_schema_v2_limit_is_converted_by_its_first_write() -> None:
    stored = replace(
        bucket(T0, {"tpm": 1_000_000}),
        limits={**bucket(T0, {"tpm": 1_000_000}).limits, "rpm": stored_config(RPM)},
        legacy_tokens={"rpm": 2000},
        last_refill_ms=T0 - 6000,
    )
    plan = _plan(stored, make_level({"rpm": 1000}))
    form, v = limit_part(plan.params, "rpm")
    assert form == "rebase"
    assert v["amount"] == T0 * 10_000 + (10_000 - 3000 + 1000) * UNIT  # 2 + 1 refilled, 1 taken
    assert "REMOVE" in plan.params["UpdateExpression"]
    assert ":was_refilled" in plan.params["ExpressionAttributeValues"]


# ---------------------------------------------------------------- rejections
def test_a_shortage_is_a_rejection_with_memory() -> None:
    stored = bucket(T0, {"rpm": 0, "tpm": 500_000})
    outcome = plan_write(stored, make_level(), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    assert outcome.retry_after_ms == 6000
    [violation] = outcome.violations
    assert (violation.entity_id, violation.resource, violation.limit_name) == ("e1", "gpt", "rpm")
    assert (violation.capacity, violation.available, violation.requested) == (10, 0, 1)
    assert violation.retry_after_seconds == 6.0
    assert outcome.memory is not None
    assert outcome.memory.until_ms == T0 + 6000
    assert outcome.memory.limits["rpm"].tokens(T0) == 0


def test_rejection_lists_every_violated_limit_and_the_longest_wait() -> None:
    stored = bucket(T0, {"rpm": 500, "tpm": 0})
    outcome = plan_write(stored, make_level({"rpm": 2000, "tpm": 300_000}), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    by_name = {v.limit_name: v for v in outcome.violations}
    assert (by_name["rpm"].available, by_name["rpm"].requested) == (0, 2)
    assert by_name["rpm"].retry_after_seconds == 9.0  # 1.5 tokens at 1 per 6 s
    assert by_name["tpm"].retry_after_seconds == 18.0  # 300 tokens at 1000/min
    assert outcome.retry_after_ms == 18_000


def test_refill_up_to_now_is_counted_before_rejecting() -> None:
    stored = bucket(T0 - 3000, {"rpm": 500, "tpm": 0})  # 3 s bring half a token
    assert isinstance(plan_write(stored, make_level({"rpm": 1000}), T0, TABLE, KEY), WritePlan)
    outcome = plan_write(stored, make_level({"rpm": 2000}), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected) and outcome.retry_after_ms == 6000


def test_debt_blocks_even_an_unconsumed_limit() -> None:
    stored = bucket(T0, {"rpm": 10_000, "tpm": -3000})
    outcome = plan_write(stored, make_level({"rpm": 1000}), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    assert [v.limit_name for v in outcome.violations] == ["tpm"]
    assert outcome.violations[0].available == -3


def test_held_and_lost_reserves_leave_no_room() -> None:
    epoch = keys.reserve_epoch(T0)
    stored = replace(
        bucket(T0, {"rpm": 10_000, "tpm": 1_000_000}),
        reserved={"rpm": {epoch: 6000, epoch - 5: 4000}},  # one live, one crashed
    )
    outcome = plan_write(stored, make_level({"rpm": 1000}), T0, TABLE, KEY)
    assert isinstance(outcome, Rejected)
    assert outcome.violations[0].available == 0


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
    assert local_rejection(state, make_level({"rpm": 1000}), T0 + 6000) is None
    again = local_rejection(state, make_level({"rpm": 2000}), T0 + 6000)
    assert isinstance(again, Rejected) and again.memory is None
    [violation] = again.violations
    assert (violation.available, violation.requested) == (1, 2)
    assert again.retry_after_ms == 6000
    assert local_rejection(state, make_level({"rpm": 2000}), T0 + 12_000) is None
    assert ("e1", "gpt") not in state.exhausted


def test_memory_is_per_entity_and_resource_and_unsharded_only() -> None:
    state = make_state()
    _exhaust(state, 2000)
    assert local_rejection(state, Level("e1", "other", (RPM, TPM), {"rpm": 2000}), T0) is None
    assert local_rejection(state, Level("e2", "gpt", (RPM, TPM), {"rpm": 2000}), T0) is None
    sharded = make_state()
    _exhaust(sharded, 1000, shard_count=2)
    assert sharded.exhausted == {}


def test_learn_forgets_the_shortage_and_remembers_the_image() -> None:
    state = make_state(known=False)
    _exhaust(state, 2000)
    shard = replace(bucket(T0, {"rpm": 0}, shard_count=4), cascade=True, parent_id="org")
    attributes = keys.new_bucket_item(NS, shard, T0)
    learn(state, make_level(), attributes, T0)
    assert ("e1", "gpt") not in state.exhausted
    meta = state.entities["e1"]
    assert (meta.facts.cascade, meta.facts.parent_id) == (True, "org")
    assert meta.shards.counts == {"gpt": 4}
    assert meta.images.items[("gpt", 0)] is attributes


@st.composite
def memories(draw: st.DrawFn) -> LimitState:
    cp = draw(st.integers(1000, 10**9))
    ra = draw(st.integers(1, 10**9))
    rp = draw(st.integers(1, 86_400_000))
    short = draw(st.integers(0, 2 * cp))
    return LimitState(
        capacity_milli=cp, refill_amount_milli=ra, refill_period_ms=rp, full_at=T0 * ra + short * rp
    )


@settings(max_examples=200, deadline=None)
@given(memories(), st.integers(0, 10**8), st.data())
def test_local_rejection_agrees_with_the_bucket_math(
    seen: LimitState, elapsed: int, data: st.DataObject
) -> None:
    need = data.draw(st.integers(1, seen.capacity_milli), label="need")
    state = make_state()
    state.exhausted[("e1", "gpt")] = Exhausted(T0 + 10**9, {"rpm": seen}, {})
    now = T0 + elapsed
    outcome = local_rejection(state, make_level({"rpm": need}, limits=(RPM,)), now)
    if seen.tokens(now) >= need:
        assert outcome is None  # never reject what the predicted tokens cover
    else:
        assert isinstance(outcome, Rejected)
        later = now + outcome.retry_after_ms
        assert seen.tokens(later) >= need
        assert seen.tokens(later - 1) < need


# ---------------------------------------------------------------- new buckets and shares
def test_new_bucket_is_full_with_the_first_take_applied() -> None:
    created = new_bucket(make_level(shard_count=4), T0, 900)
    assert created.shard_count == 4 and created.partition_wcu == 900
    rpm = created.limits["rpm"]
    assert (rpm.capacity_milli, rpm.refill_amount_milli, rpm.refill_period_ms) == (
        10_000,
        10_000,
        60_000,
    )
    assert rpm.total_consumed_milli == 1000
    assert rpm.tokens(T0, count=4) == 10_000 // 4 - 1000


def test_a_split_shard_copies_its_donors_full_at_times() -> None:
    donor = bucket(T0, {"rpm": 1000}, shard_count=2).limits["rpm"]
    created = new_bucket(make_level({}, shard_count=2), T0, 1000, {"rpm": donor.full_at})
    assert created.limits["rpm"].full_at == donor.full_at
    assert created.limits["tpm"].tokens(T0, count=2) == 500_000


def _shards(count: int, present: list[int]) -> list[BucketState]:
    return [BucketState("e", "r", i, count, 0, {}) for i in present]


def test_each_shard_holds_the_shares_of_the_shards_not_yet_made_from_it() -> None:
    assert [donor_of(k) for k in range(1, 8)] == [0, 0, 1, 0, 1, 2, 3]
    assert shares_held(_shards(4, [0, 1])) == {0: 2, 1: 2}
    assert shares_held(_shards(8, [0, 1, 3, 5, 6, 7])) == {0: 3, 1: 1, 3: 1, 5: 1, 6: 1, 7: 1}
    assert shares_held(_shards(8, [0, 1, 3])) == {0: 4, 1: 2, 3: 2}


def test_reads_measure_a_shard_in_shard_zeros_shares() -> None:
    stale = [replace(b, shard_count=2) if b.shard_id else b for b in _shards(4, [0, 1])]
    counted = read_shares(stale)
    assert [(b.shard_id, b.shard_count, n) for b, n in counted] == [(0, 4, 2), (1, 4, 2)]
