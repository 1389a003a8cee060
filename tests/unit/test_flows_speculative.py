"""The speculative write's proofs (flows/speculative.py): any item a ceiling lets through
can leave its refill for later without losing a clamp, a fill never sets more than an
exact refill-and-take leaves, and a fresh image passes its own ceiling."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit._flowkit import (
    LIMITS,
    T0,
    drive,
    failed,
    item,
    make_level,
    make_state,
    ok,
    value_of,
)
from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows.bucket_write import effective
from zae_limiter.flows.speculative import BLIND_MS, ceiling_for, fill_for, keep_image
from zae_limiter.flows.take import take

EPOCH = keys.reserve_epoch(T0)


def shard(rf: int, tokens: dict[str, int], held: dict[str, tuple[int, int]], count: int) -> Any:
    """A bucket item with held counts in this epoch and the one before, per limit."""
    image = item(rf, tokens, shard_count=count)
    for name, (now, before) in held.items():
        image[keys.reserve_attr(name, EPOCH)] = {"N": str(now)}
        image[keys.reserve_attr(name, EPOCH - 1)] = {"N": str(before)}
    return image


def passes(ceiling: keys.Ceiling, image: Any) -> bool:
    """The ceiling's clauses, as DynamoDB evaluates them on `image`."""
    if keys.get_n(image, keys.A_REFILL) < ceiling.refilled_since:
        return False
    if keys.get_n(image, keys.A_SHARD_COUNT, 1) > ceiling.shard_count:
        return False
    for name, most in ceiling.tokens.items():
        if keys.get_n(image, keys.limit_attr(name, "tk")) > most:
            return False
        now = image.get(keys.reserve_attr(name, ceiling.epoch))
        before = image.get(keys.reserve_attr(name, ceiling.epoch - 1))
        if now is not None and int(now["N"]) > ceiling.held.get(name, 0):
            return False
        if before is not None and int(before["N"]) > ceiling.held_before.get(name, 0):
            return False
    return True


def clamps(image: Any, count: int) -> bool:
    """Whether refilling `image` (a shard of `count`) to T0 would clamp (lose refill)."""
    rf = keys.get_n(image, keys.A_REFILL)
    for limit in LIMITS:
        share = effective(limit, count)
        tk = keys.get_n(image, keys.limit_attr(limit.name, "tk"))
        held = sum(
            keys.get_n(image, keys.reserve_attr(limit.name, e)) for e in (EPOCH, EPOCH - 1)
        )
        if tk + share.refill_gain(rf, T0) + max(0, held) > share.capacity_milli:
            return True
    return False


ages = st.integers(min_value=0, max_value=120_000)
rpm = st.integers(min_value=0, max_value=10_000)
tpm = st.integers(min_value=0, max_value=1_000_000)
held = st.tuples(st.integers(0, 3000), st.integers(0, 3000))
counts = st.sampled_from([1, 2, 4])


@given(ages, rpm, tpm, held, counts, ages, rpm, tpm, held, counts)
def test_an_item_that_passes_the_ceiling_loses_no_clamp(
    seen_age: int,
    seen_rpm: int,
    seen_tpm: int,
    seen_held: tuple[int, int],
    seen_count: int,
    age: int,
    now_rpm: int,
    now_tpm: int,
    now_held: tuple[int, int],
    count: int,
) -> None:
    image = shard(T0 - seen_age, {"rpm": seen_rpm, "tpm": seen_tpm}, {"rpm": seen_held}, seen_count)
    current = shard(T0 - age, {"rpm": now_rpm, "tpm": now_tpm}, {"rpm": now_held}, count)
    for seen in (image, None):
        ceiling = ceiling_for(seen, make_level(shard_count=seen_count), T0)
        if ceiling is not None and passes(ceiling, current):
            assert not clamps(current, count)


@given(ages, rpm, tpm, held, counts, st.booleans())
def test_the_worst_item_a_ceiling_lets_through_loses_no_clamp(
    age: int, tokens: int, tpm_tokens: int, reserved: tuple[int, int], count: int, blind: bool
) -> None:
    # The most tokens, the most held and the oldest `rf` the ceiling allows, all at once:
    # a clamp is monotone in each, so if this one does not clamp, nothing that passes does.
    image = shard(T0 - age, {"rpm": tokens, "tpm": tpm_tokens}, {"rpm": reserved}, count)
    ceiling = ceiling_for(None if blind else image, make_level(shard_count=count), T0)
    if ceiling is None:
        return
    worst = shard(
        ceiling.refilled_since,
        dict(ceiling.tokens),
        {
            name: (ceiling.held.get(name, 0), ceiling.held_before.get(name, 0))
            for name in ceiling.tokens
        },
        ceiling.shard_count,
    )
    assert passes(ceiling, worst)
    assert not clamps(worst, count)


@given(ages, rpm, tpm, held, counts)
def test_a_fresh_image_passes_its_own_ceiling_unless_it_clamps(
    age: int, tokens: int, tpm_tokens: int, reserved: tuple[int, int], count: int
) -> None:
    image = shard(T0 - age, {"rpm": tokens, "tpm": tpm_tokens}, {"rpm": reserved}, count)
    ceiling = ceiling_for(image, make_level(shard_count=count), T0)
    assert (ceiling is None) == clamps(image, count)
    if ceiling is not None:
        assert passes(ceiling, image)


def test_without_an_image_the_shard_must_have_refilled_within_a_second() -> None:
    ceiling = ceiling_for(None, make_level(), T0)
    assert ceiling is not None and ceiling.refilled_since == T0 - BLIND_MS
    # rpm refills 1 token per 6 s: within 1 s at most 1 millitoken step, tpm 16 tokens
    assert ceiling.tokens["rpm"] == 10_000 - effective(LIMITS[0], 1).refill_gain(
        T0 - BLIND_MS, T0
    )
    assert ceiling.held == {} and ceiling.held_before == {}


def test_a_full_image_writes_its_refill_with_the_take() -> None:
    state = make_state()
    level = make_level()
    keep_image(state, level, item(T0 - 60_000, {"rpm": 9000, "tpm": 900_000}))
    _, log = drive(take(state, level, T0, True), [ok()])
    [write] = log
    params = write.params
    values = params["ExpressionAttributeValues"]
    assert "#rf = :now" in params["UpdateExpression"] and values[":now"] == {"N": str(T0)}
    # 12 s of refill bring two takes (2 rpm, 200 tpm): any `tk` that high is full now
    assert values[":rby"] == {"N": str(T0 - 12_000)}
    assert value_of(params, "b_rpm_tk >=", "ConditionExpression") == 8000
    assert value_of(params, "b_rpm_tk =", "UpdateExpression") == 10_000 - 1000
    assert value_of(params, "b_tpm_tk =", "UpdateExpression") == 1_000_000 - 100_000


def test_an_image_refilled_too_recently_to_prove_it_full_writes_from_the_image() -> None:
    state = make_state()
    level = make_level()
    keep_image(state, level, item(T0 - 6000, {"rpm": 9500, "tpm": 990_000}))
    _, log = drive(take(state, level, T0, True), [ok()])
    values = log[0].params["ExpressionAttributeValues"]
    assert values[":old_rf"] == {"N": str(T0 - 6000)} and values[":rf"] == {"N": str(T0)}


@given(ages, rpm, held, ages, st.integers(0, 20_000), held)
def test_a_fill_never_sets_more_than_an_exact_refill_and_take_leaves(
    seen_age: int,
    seen_rpm: int,
    seen_held: tuple[int, int],
    since: int,
    above: int,
    less_held: tuple[int, int],
) -> None:
    level = make_level(limits=LIMITS[:1], consume={"rpm": 1000})
    image = shard(T0 - seen_age, {"rpm": seen_rpm}, {"rpm": seen_held}, 1)
    fill = fill_for(image, level, T0)
    if fill is None:
        return
    # Any item the condition lets through: `rf` no later, `tk` no lower, held no larger.
    held_now = max(0, fill.held["rpm"] - less_held[0])
    held_before = max(0, fill.held_before["rpm"] - less_held[1])
    rf = fill.refilled_by - since
    tk = fill.least["rpm"] + above
    share = effective(LIMITS[0], 1)
    room = share.capacity_milli - max(0, held_now + held_before)
    exact = min(room, tk + share.refill_gain(rf, T0)) - 1000
    assert 0 <= fill.tokens["rpm"] <= exact


def test_an_image_with_room_speculates_under_its_ceiling() -> None:
    state = make_state()
    level = make_level()
    keep_image(state, level, item(T0 - 6000, {"rpm": 4000, "tpm": 500_000}))
    _, log = drive(take(state, level, T0, True), [ok()])
    values = log[0].params["ExpressionAttributeValues"]
    assert values[":rmin"] == {"N": str(T0 - 6000)}
    # rpm: 10,000 - 1,000 refilled - 4,000 stored = 5,000 slack, half for the tokens
    assert values[":k0"] == {"N": "6500"}
    assert values[":q0"] == {"N": "2500"} and values[":o0"] == {"N": "0"}


def test_the_image_follows_every_answer() -> None:
    state = make_state()
    level = make_level()
    old = item(T0 - 30_000, {"rpm": 0, "tpm": 500_000})
    new = item(T0, {"rpm": 4000, "tpm": 900_000})
    drive(take(state, level, T0, True), [failed(old), ok(new)])
    assert state.images[("e1", "gpt", 0)] == new
    drive(take(state, level, T0, True), [failed(None), ok()])
    assert ("e1", "gpt", 0) in state.images  # the bucket made again is what is seen now


def test_a_failed_proof_learns_the_shard_count_from_shard_0() -> None:
    # Another client doubled: the ceiling's `shard_count <= 1` fails, and the fallback
    # write may be throttled on the hot shard, so ALL_OLD alone teaches the count.
    state = make_state()
    doubled = item(T0, {"rpm": 5000, "tpm": 500_000}, shard_count=2)
    flow = take(state, make_level(), T0, True)
    first = next(flow)
    assert ":scmax" in first.params["ExpressionAttributeValues"]
    fallback = flow.send(failed(doubled))
    assert fallback.op == "update_item"
    with pytest.raises(RateLimiterUnavailable):
        flow.throw(RateLimiterUnavailable("throttled", code="ThrottlingException"))
    assert state.shard_count("e1", "gpt") == 2
