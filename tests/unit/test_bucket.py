"""Token-bucket arithmetic (bucket.py): integer millitokens, time as an input."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from zae_limiter.bucket import LimitState, accrued, from_milli_floor, to_milli

PROPS = settings(max_examples=200, deadline=None)

capacities = st.integers(min_value=1, max_value=10**15)
amounts = st.integers(min_value=1, max_value=10**15)
periods = st.integers(min_value=1, max_value=366 * 86_400_000)
times = st.integers(min_value=0, max_value=10**13)


@st.composite
def limit_states(draw: st.DrawFn) -> LimitState:
    cp = draw(capacities)
    # tokens anywhere from deep debt to the capacity (and a little above: capacity lowered)
    tk = draw(st.integers(min_value=-3 * cp, max_value=cp + cp // 10))
    return LimitState(tk, cp, draw(amounts), draw(periods), draw(st.integers(0, 10**15)))


# ---------------------------------------------------------------- examples
def test_refill_one_token_per_second() -> None:
    state = LimitState(0, 10_000, 1000, 1000)
    assert state.refilled(0, 999).tokens_milli == 999
    assert state.refilled(0, 1000).tokens_milli == 1000
    assert state.refilled(0, 2500).tokens_milli == 2500


def test_refill_is_capped_and_keeps_config() -> None:
    state = LimitState(9_000, 10_000, 1000, 1000, total_consumed_milli=7)
    after = state.refilled(5_000, 1_000_000)
    assert after.tokens_milli == 10_000
    assert (after.capacity_milli, after.refill_amount_milli, after.refill_period_ms) == (
        10_000,
        1000,
        1000,
    )
    assert after.total_consumed_milli == 7


def test_lowered_capacity_brings_tokens_down() -> None:
    assert LimitState(50_000, 10_000, 1, 1000).refilled(0, 0).tokens_milli == 10_000


def test_debt_is_repaid_before_tokens_appear() -> None:
    state = LimitState(-5_000, 10_000, 1000, 1000)
    assert state.refilled(0, 4_000).tokens_milli == -1_000
    assert state.refilled(0, 6_000).tokens_milli == 1_000


def test_time_going_backwards_gives_nothing() -> None:
    state = LimitState(100, 10_000, 1000, 1000)
    assert state.refill_gain(10_000, 9_000) == 0
    assert state.refill_gain(10_000, 10_000) == 0
    assert state.refilled(10_000, 0).tokens_milli == 100


def test_ms_until_examples() -> None:
    state = LimitState(0, 10_000, 1000, 1000)  # 1 token/s
    assert state.ms_until(0, 0, 0) == 0
    assert state.ms_until(1000, 0, 0) == 1000
    assert state.ms_until(1000, 0, 400) == 600
    assert state.ms_until(10_000, 0, 0) == 10_000
    assert state.ms_until(10_001, 0, 0) == -1


def test_ms_until_for_slow_rates_rounds_up() -> None:
    # 1 millitoken per 3 ms: 2 millitokens need 6 ms from an aligned start
    state = LimitState(0, 100, 1, 3)
    assert state.ms_until(2, 0, 0) == 6
    assert state.ms_until(2, 1, 1) == 5  # accrued(1) == 0, so the boundary is still t=6


def test_milli_helpers() -> None:
    assert to_milli(7) == 7000
    assert from_milli_floor(7999) == 7
    assert from_milli_floor(-1) == -1
    assert from_milli_floor(-1000) == -1
    assert from_milli_floor(-1001) == -2
    assert accrued(1000, 1000, 1000) == 1000
    assert accrued(999, 1, 1000) == 0


# ---------------------------------------------------------------- properties
@PROPS
@given(limit_states(), times, times)
def test_tokens_never_exceed_capacity_after_refill(state: LimitState, t0: int, t1: int) -> None:
    after = state.refilled(t0, t1)
    assert after.tokens_milli <= state.capacity_milli
    # and never fewer than before (refill only adds, except to cut down to capacity)
    assert after.tokens_milli >= min(state.tokens_milli, state.capacity_milli)


@PROPS
@given(limit_states(), times, st.lists(st.integers(0, 10**11), min_size=1, max_size=12))
def test_refill_in_steps_equals_refill_at_once(
    state: LimitState, t0: int, steps: list[int]
) -> None:
    instants = [t0]
    for step in steps:
        instants.append(instants[-1] + step)
    stepped = state
    for before, after in pairwise(instants):
        stepped = stepped.refilled(before, after)
    at_once = state.refilled(instants[0], instants[-1])
    assert stepped == at_once


@PROPS
@given(amounts, periods, times, st.integers(0, 10**12))
def test_no_drift_over_long_spans(ra: int, rp: int, t0: int, span: int) -> None:
    t1 = t0 + span
    expected = (t1 * ra) // rp - (t0 * ra) // rp
    # start deep enough in debt that the capacity never binds
    state = LimitState(-expected - 1, 10**40, ra, rp)
    assert state.refill_gain(t0, t1) == expected
    assert state.refilled(t0, t1).tokens_milli == -1
    # the same gain accumulated one (small) step at a time
    total = 0
    instant = t0
    step = max(1, span // 7)
    while instant < t1:
        nxt = min(t1, instant + step)
        total += state.refill_gain(instant, nxt)
        instant = nxt
    assert total == expected


@PROPS
@given(limit_states(), times, times)
def test_time_going_backwards_gives_no_tokens(state: LimitState, a: int, b: int) -> None:
    last, now = max(a, b), min(a, b)
    assert state.refill_gain(last, now) == 0
    assert state.refilled(last, now).tokens_milli == min(state.tokens_milli, state.capacity_milli)


@PROPS
@given(limit_states(), times, st.integers(-(10**9), 10**9), st.data())
def test_ms_until_is_the_smallest_wait(
    state: LimitState, last: int, offset: int, data: st.DataObject
) -> None:
    now = max(0, last + offset)  # now may be before the last refill
    needed = data.draw(st.integers(0, state.capacity_milli), label="needed")
    wait = state.ms_until(needed, last, now)
    assert wait >= 0
    assert state.refilled(last, now + wait).tokens_milli >= needed
    if wait > 0:
        assert state.refilled(last, now + wait - 1).tokens_milli < needed
    else:
        assert state.refilled(last, now).tokens_milli >= needed


@PROPS
@given(limit_states(), times, times, st.integers(1, 10**15))
def test_ms_until_is_minus_one_when_request_exceeds_capacity(
    state: LimitState, last: int, now: int, extra: int
) -> None:
    assume(state.refilled(last, now).tokens_milli < state.capacity_milli + extra)
    assert state.ms_until(state.capacity_milli + extra, last, now) == -1


@PROPS
@given(limit_states(), times, times, st.integers(min_value=-(10**15), max_value=0))
def test_ms_until_is_zero_when_tokens_are_there(
    state: LimitState, last: int, now: int, needed: int
) -> None:
    current = state.refilled(last, now).tokens_milli
    assume(current >= needed)
    assert state.ms_until(needed, last, now) == 0
    assert state.ms_until(current, last, now) == 0
