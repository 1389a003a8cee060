"""The ideal token bucket the exactness tests judge by (tests/exactness_model.py)."""

from __future__ import annotations

from fractions import Fraction

from tests.exactness_model import Arrival, IdealBucket, Replay, burst_scenarios, fill_ms, judge
from zae_limiter import Limit

TEN_PER_SECOND = Limit.per_second("rps", 10)


def test_a_full_bucket_admits_its_capacity_then_one_per_refill() -> None:
    bucket = IdealBucket(TEN_PER_SECOND, 0)
    assert [bucket.take(1, 0) for _ in range(11)] == [True] * 10 + [False]
    assert not bucket.take(1, 99)  # 0.99 of a token
    assert bucket.take(1, 100)
    assert bucket.tokens == 0


def test_refill_is_exact_and_stops_at_capacity() -> None:
    bucket = IdealBucket(Limit.per_minute("rpm", 7), 0)
    bucket.take(7, 0)
    bucket.refill(1000)
    assert bucket.tokens == Fraction(7, 60)
    bucket.refill(10 * 60_000)
    assert bucket.tokens == 7


def test_a_charge_may_leave_debt_a_give_back_never_passes_capacity() -> None:
    bucket = IdealBucket(TEN_PER_SECOND, 0)
    bucket.charge(15, 0)
    assert bucket.tokens == -5
    assert not bucket.take(1, 500)  # the debt is paid first
    bucket.give_back(100, 500)
    assert bucket.tokens == 10


def test_judge_counts_the_burst_only_and_how_far_ahead_the_run_got() -> None:
    plan = [Arrival(0), *[Arrival(3000 + i, 1, True) for i in range(12)]]
    seen = [(0, True), *[(3000 + i, True) for i in range(12)]]  # everything admitted
    verdict = judge(TEN_PER_SECOND, plan, seen)
    assert (verdict.admitted, verdict.ideal, verdict.attempts) == (12, 10, 12)
    assert verdict.over == 2 and verdict.worst_excess == 2
    assert verdict.burst_ms == 11


def test_replay_flags_an_admission_the_bucket_could_not_make() -> None:
    replay = Replay(TEN_PER_SECOND, 0)
    replay.take(8, 0, True)
    replay.adjust(-3, 0)  # 5 left
    replay.take(5, 0, True)
    assert not replay.violations
    replay.take(1, 50, True)  # half a token refilled
    assert len(replay.violations) == 1
    assert replay.admitted == 11


def test_scenarios_scale_with_the_time_the_bucket_takes_to_fill() -> None:
    assert fill_ms(Limit.per_minute("rpm", 10)) == 60_000
    after_idle = burst_scenarios(60_000)[0]
    assert after_idle.name == "after-idle"
    judged = [a for a in after_idle.arrivals if a.judged]
    assert len(judged) == 40 and judged[0].offset_ms == 180_000
