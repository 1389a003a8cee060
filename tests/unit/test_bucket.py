"""Token-bucket arithmetic (bucket.py): full-at times in exact integers, time an input."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from zae_limiter.bucket import LimitState, accrued, from_milli_floor, legacy_tokens, to_milli

PROPS = settings(max_examples=200, deadline=None)

capacities = st.integers(min_value=1, max_value=10**15)
amounts = st.integers(min_value=1, max_value=10**15)
periods = st.integers(min_value=1, max_value=366 * 86_400_000)
times = st.integers(min_value=0, max_value=10**13)
counts = st.sampled_from([1, 2, 4, 8])


@st.composite
def limit_states(draw: st.DrawFn) -> LimitState:
    cp, ra, rp = draw(capacities), draw(amounts), draw(periods)
    now = draw(times)
    # full at anywhere from long ago to a few capacities (debt) ahead
    ahead = draw(st.integers(min_value=-(10**6), max_value=3 * cp)) * rp
    full_at = draw(st.one_of(st.none(), st.just(now * ra + ahead)))
    return LimitState(
        capacity_milli=cp, refill_amount_milli=ra, refill_period_ms=rp, full_at=full_at
    )


def per_second(capacity: int, rate: int, full_at: int | None = None) -> LimitState:
    return LimitState(
        capacity_milli=capacity * 1000,
        refill_amount_milli=rate * 1000,
        refill_period_ms=1000,
        full_at=full_at,
    )


# ---------------------------------------------------------------- examples
def test_a_limit_never_taken_is_full() -> None:
    state = per_second(10, 10)
    assert state.tokens(5_000) == 10_000
    assert state.is_full(5_000)
    assert state.full_in_ms(5_000) == 0


def test_a_take_on_a_full_bucket_starts_from_now() -> None:
    state = per_second(10, 10)
    # full long ago: the SET form counts from now, not from the stale full-at time
    after = LimitState(**{**_fields(state), "full_at": state.charged(4_000, 3_000)})
    assert after.tokens(3_000) == 6_000
    assert after.full_in_ms(3_000) == 400
    assert after.tokens(3_400) == 10_000
    assert after.tokens(3_200) == 8_000


def test_a_take_on_a_bucket_short_of_full_adds() -> None:
    state = per_second(10, 1, full_at=5_000 * 1000)  # full at 5 s, 1 token/s
    assert state.tokens(2_000) == 7_000
    after = LimitState(**{**_fields(state), "full_at": state.charged(2_000, 2_000)})
    assert after.tokens(2_000) == 5_000
    assert after.full_in_ms(2_000) == 5_000


def test_a_give_back_past_full_is_clamped_by_the_formula() -> None:
    state = per_second(10, 1, full_at=3_000 * 1000)  # 1 token short at 2 s
    back = LimitState(**{**_fields(state), "full_at": state.given_back(5_000)})
    assert back.tokens(2_000) == 10_000
    assert back.is_full(2_000)


def test_debt_is_repaid_before_tokens_appear() -> None:
    state = per_second(10, 1, full_at=15_000 * 1000)  # 15 tokens short at 0: 5 of debt
    assert state.tokens(0) == -5_000
    assert state.tokens(6_000) == 1_000
    assert state.ms_until(1_000, 0) == 6_000


def test_deficit_rounds_in_the_limiters_favour() -> None:
    # 1 millitoken per 3 ms: 1 ms short of full is a whole millitoken short
    state = LimitState(capacity_milli=100, refill_amount_milli=1, refill_period_ms=3, full_at=7)
    assert state.deficit(6) == 1
    assert state.tokens(6) == 99
    assert state.tokens(7) == 100


def test_reserves_and_shards_shrink_the_room() -> None:
    state = per_second(10, 10, full_at=1_000 * 10_000)  # 10 tokens short at 0
    assert state.tokens(500, count=1) == 5_000
    # half the capacity, half the rate: a shard at the same full-at time lacks half as much
    assert state.tokens(500, count=2) == 2_500
    assert state.tokens(500, count=2, held=1_000) == 1_500
    assert state.ms_until(5_000, 0, count=2) == 1_000
    assert state.ms_until(5_001, 0, count=2) == -1


def test_legacy_items_convert_with_the_v2_refill() -> None:
    state = per_second(10, 10)
    assert legacy_tokens(state, 2_000, 1_000, 1_300, count=1, held=0) == 5_000
    assert legacy_tokens(state, 9_000, 1_000, 5_000, count=1, held=3_000) == 7_000
    assert legacy_tokens(state, 0, 1_000, 1_100, count=2, held=0) == 500


def test_milli_helpers() -> None:
    assert to_milli(7) == 7000
    assert from_milli_floor(7999) == 7
    assert from_milli_floor(-1001) == -2
    assert accrued(999, 1, 1000) == 0


def _fields(state: LimitState) -> dict[str, int | None]:
    return {
        "capacity_milli": state.capacity_milli,
        "refill_amount_milli": state.refill_amount_milli,
        "refill_period_ms": state.refill_period_ms,
        "full_at": state.full_at,
    }


# ---------------------------------------------------------------- against an ideal bucket
class IdealBucket:
    """A continuous token bucket in exact fractions: tokens grow at `rate` per ms up to
    `capacity`; a take succeeds when the tokens cover it."""

    def __init__(self, capacity: int, rate: Fraction) -> None:
        self.capacity, self.rate = Fraction(capacity), rate
        self.tokens, self.at = Fraction(capacity), 0

    def take(self, n: int, now: int) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False


def _run_against_ideal(state: LimitState, arrivals: list[tuple[int, int]], count: int) -> None:
    cap = state.room(count)
    ideal = IdealBucket(cap, Fraction(state.refill_amount_milli, state.refill_period_ms * count))
    for now, n in arrivals:
        admit = state.tokens(now, count) >= n
        # The ceiling of an integer bound decides exactly as the ideal does: same answers.
        assert ideal.take(n, now) == admit
        if admit:
            state = LimitState(**{**_fields(state), "full_at": state.charged(n, now, count)})
        # rounding costs less than one millitoken against the ideal, never more
        assert ideal.tokens - 1 < state.tokens(now, count) <= ideal.tokens


arrival_lists = st.lists(
    st.tuples(st.integers(0, 5_000), st.integers(1, 4_000)), min_size=1, max_size=60
)


def _timed(steps: list[tuple[int, int]], scale: int) -> list[tuple[int, int]]:
    now, out = 0, []
    for gap, n in steps:
        now += gap * scale
        out.append((now, n))
    return out


@PROPS
@given(arrival_lists, counts)
def test_per_second_limit_admits_no_more_than_an_ideal_bucket(
    steps: list[tuple[int, int]], count: int
) -> None:
    _run_against_ideal(per_second(10, 10), _timed(steps, 1), count)


@PROPS
@given(arrival_lists, counts)
def test_per_minute_limit_admits_no_more_than_an_ideal_bucket(
    steps: list[tuple[int, int]], count: int
) -> None:
    per_minute = LimitState(
        capacity_milli=100_000, refill_amount_milli=100_000, refill_period_ms=60_000
    )
    _run_against_ideal(per_minute, _timed(steps, 7), count)


def test_the_issue_burst_admits_what_an_ideal_bucket_admits() -> None:
    # one take, 3 s idle (full again), then 40 takes 1 ms apart: an ideal bucket admits 10
    state = per_second(10, 10)
    state = LimitState(**{**_fields(state), "full_at": state.charged(1_000, 0)})
    admitted = 0
    for i in range(40):
        now = 3_000 + i
        if state.tokens(now) >= 1_000:
            state = LimitState(**{**_fields(state), "full_at": state.charged(1_000, now)})
            admitted += 1
    assert admitted == 10


# ---------------------------------------------------------------- properties
@PROPS
@given(limit_states(), times, counts)
def test_tokens_never_exceed_the_room(state: LimitState, now: int, count: int) -> None:
    assert state.tokens(now, count) <= state.room(count)


@PROPS
@given(limit_states(), times, st.integers(0, 10**9), counts)
def test_time_only_adds_tokens(state: LimitState, now: int, later: int, count: int) -> None:
    assert state.tokens(now + later, count) >= state.tokens(now, count)


@PROPS
@given(limit_states(), times, st.integers(-(10**9), 10**9), counts, st.data())
def test_ms_until_is_the_smallest_wait(
    state: LimitState, now: int, offset: int, count: int, data: st.DataObject
) -> None:
    now = max(0, now + offset)
    needed = data.draw(st.integers(-(10**6), state.room(count)), label="needed")
    wait = state.ms_until(needed, now, count)
    assert wait >= 0
    assert state.tokens(now + wait, count) >= needed
    if wait > 0:
        assert state.tokens(now + wait - 1, count) < needed


@PROPS
@given(limit_states(), times, st.integers(1, 10**15), counts)
def test_ms_until_is_minus_one_past_the_room(
    state: LimitState, now: int, extra: int, count: int
) -> None:
    assert state.ms_until(state.room(count) + extra, now, count) == -1


@PROPS
@given(limit_states(), times, st.integers(0, 10**9), counts)
def test_a_take_removes_exactly_what_it_takes(
    state: LimitState, now: int, n: int, count: int
) -> None:
    after = LimitState(**{**_fields(state), "full_at": state.charged(n, now, count)})
    assert after.tokens(now, count) == state.tokens(now, count) - n


@PROPS
@given(limit_states(), times, st.integers(-(10**9), 10**9), counts)
def test_with_tokens_round_trips(state: LimitState, now: int, tokens: int, count: int) -> None:
    fa = state.with_tokens(tokens, now, count)
    after = LimitState(**{**_fields(state), "full_at": fa})
    assert after.tokens(now, count) == min(tokens, state.room(count))
