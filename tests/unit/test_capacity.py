"""Admission control and the meter (capacity.py): time is passed in, never read."""

from __future__ import annotations

import pytest

from zae_limiter.capacity import (
    REFUSE,
    AdaptiveRate,
    Admission,
    CapacityMeter,
    Cost,
    FixedRate,
    capacity_stats,
    estimate,
    reported,
)

T0 = 1_800_000_000_000
WRITE = Cost(wcu=1)
READ = Cost(rcu=1)


@pytest.mark.parametrize(
    ("op", "params", "cost"),
    [
        ("update_item", {}, Cost(wcu=1)),
        ("put_item", {}, Cost(wcu=1)),
        ("delete_item", {}, Cost(wcu=1)),
        ("get_item", {"ConsistentRead": True}, Cost(rcu=1)),
        ("get_item", {}, Cost(rcu=0.5)),
        ("batch_get_item", {"RequestItems": {"t": {"Keys": [{}, {}, {}, {}]}}}, Cost(rcu=2)),
        ("batch_write_item", {"RequestItems": {"t": [{}, {}, {}]}}, Cost(wcu=3)),
        ("transact_write_items", {"TransactItems": [{}, {}]}, Cost(wcu=4)),
        ("query", {}, Cost(rcu=1)),
        ("scan", {}, Cost(rcu=1)),
        ("describe_table", {}, Cost()),
    ],
)
def test_estimates_by_op(op: str, params: dict[str, object], cost: Cost) -> None:
    assert estimate(op, params) == cost


def test_reported_cost_counts_a_failed_condition_as_one_wcu() -> None:
    assert reported("update_item", {"ConsumedCapacity": {"CapacityUnits": 2.0}}, True).wcu == 2
    assert reported("update_item", {}, False) == Cost(wcu=1)
    assert reported("query", {"ConsumedCapacity": [{"CapacityUnits": 1.5}]}, True) == Cost(rcu=1.5)


def test_meter_totals_measurements_and_throttles() -> None:
    meter = CapacityMeter()
    with meter.measure() as m:
        meter.record("update_item", {"ConsumedCapacity": {"CapacityUnits": 1.0}}, True, 1)
        meter.record("get_item", {"ConsumedCapacity": {"CapacityUnits": 0.5}}, True, 1)
    meter.record_throttle()
    assert (m.ops, m.round_trips, m.rcu, m.wcu) == (["update_item", "get_item"], 1, 0.5, 1)
    stats = capacity_stats(meter, None, T0)
    assert (stats.calls, stats.consumed_wcu, stats.throttles, stats.rcu_rate) == (2, 1, 1, None)


def test_fixed_rate_spends_the_burst_then_waits_then_refuses() -> None:
    gate = Admission(FixedRate(wcu=10, burst=5), max_wait=0.25)
    assert [gate.admit(WRITE, T0) for _ in range(5)] == [0] * 5
    assert gate.admit(WRITE, T0) == 100  # one unit at 10 per second
    assert gate.admit(WRITE, T0) == 200
    assert gate.admit(WRITE, T0) == REFUSE  # 300 ms > max_wait: nothing reserved
    assert gate.admit(WRITE, T0 + 300) == 0
    assert gate.admit(READ, T0) == 0  # no read budget: reads are not limited
    assert (gate.waits, gate.wait_ms_total, gate.refusals) == (2, 300, 1)


def test_max_wait_can_be_lowered_per_call_and_force_never_refuses() -> None:
    gate = Admission(FixedRate(wcu=10, burst=1), max_wait=0.5)
    assert gate.admit(WRITE, T0) == 0
    assert gate.admit(WRITE, T0, max_wait_ms=50) == REFUSE
    assert gate.admit(WRITE, T0, force=True) == 100
    assert gate.admit(WRITE, T0 + 100, force=True) == 100
    assert gate.admit(Cost(wcu=100), T0, force=True) == 200  # goes when "full", into debt
    assert gate.admit(WRITE, T0 + 1000) == REFUSE


def test_settle_corrects_the_estimate_by_what_was_reported() -> None:
    gate = Admission(FixedRate(rcu=10, burst=10))
    gate.admit(Cost(rcu=5), T0)
    gate.settle(Cost(rcu=5), Cost(rcu=10))  # the call cost twice the estimate
    assert gate.admit(READ, T0) == 100
    gate.settle(READ, Cost())  # e.g. throttled: nothing was consumed
    assert gate.admit(READ, T0) == 100


def test_a_call_bigger_than_the_burst_goes_when_full_and_leaves_debt() -> None:
    gate = Admission(FixedRate(rcu=10, burst=10), max_wait=10)
    assert gate.admit(Cost(rcu=50), T0) == 0
    assert gate.admit(READ, T0) == 4100  # 40 units of debt, then one more unit


@pytest.mark.parametrize(("burst", "cost"), [(None, 1.0), (50, 1.0), (20, 2.5), (5, 0.5)])
def test_fixed_rate_keeps_consumption_within_rate_times_time_plus_burst(
    burst: float | None, cost: float
) -> None:
    rate = 40.0
    gate = Admission(FixedRate(wcu=rate, burst=burst), max_wait=0.5)
    now, spent, refused = T0, 0.0, 0
    duration_ms = 10 * 60_000  # ten simulated minutes of a caller that never stops
    while now < T0 + duration_ms:
        wait = gate.admit(Cost(wcu=cost), now)
        if wait == REFUSE:
            refused += 1
            now += 7
            continue
        now += wait  # the driver sleeps, then calls
        spent += cost
        now += 1
    elapsed_s = (now - T0) / 1000
    allowed = rate * elapsed_s + (burst or rate)
    assert spent <= allowed + cost
    assert spent >= 0.95 * rate * elapsed_s  # and the budget is used, not wasted
    assert refused == 0  # a single caller that waits as told is never refused


def test_fixed_rate_with_many_callers_refuses_beyond_the_bound() -> None:
    gate = Admission(FixedRate(wcu=10), max_wait=0.5)
    answers = [gate.admit(WRITE, T0) for _ in range(30)]
    assert answers.count(REFUSE) == 30 - 15  # 10 burst + 5 within 500 ms
    assert max(a for a in answers if a != REFUSE) == 500


def test_adaptive_rate_starts_at_half_and_cuts_by_a_fifth_on_a_throttle() -> None:
    gate = Admission(AdaptiveRate(max_rcu=100, max_wcu=50))
    assert gate.rates(T0) == (50, 25)
    gate.throttled(T0 + 1)
    assert gate.rates(T0 + 1) == pytest.approx((40, 20))
    gate.throttled(T0 + 2)
    assert gate.rates(T0 + 2) == pytest.approx((32, 16))


def test_adaptive_rate_grows_a_tenth_after_ten_quiet_seconds() -> None:
    gate = Admission(AdaptiveRate(max_rcu=100, max_wcu=50))
    gate.throttled(T0)
    assert gate.rates(T0 + 9_999) == pytest.approx((40, 20))
    assert gate.rates(T0 + 10_000) == pytest.approx((44, 22))
    assert gate.rates(T0 + 30_000) == pytest.approx((40 * 1.1**3, 20 * 1.1**3))
    gate.throttled(T0 + 30_001)  # a throttle restarts the quiet period
    assert gate.rates(T0 + 39_999) == pytest.approx((40 * 1.1**3 * 0.8, 20 * 1.1**3 * 0.8))


def test_adaptive_rate_stays_within_min_and_max() -> None:
    gate = Admission(AdaptiveRate(max_rcu=100, max_wcu=20, min_rcu=5, min_wcu=2))
    for i in range(50):
        gate.throttled(T0 + i)
    assert gate.rates(T0 + 50) == (5, 2)
    assert gate.rates(T0 + 3_600_000) == (100, 20)
    assert Admission(AdaptiveRate(max_rcu=10)).rates(T0) == (5, None)


def test_adaptive_rate_admits_at_its_current_rate() -> None:
    gate = Admission(AdaptiveRate(max_rcu=20, max_wcu=20), max_wait=5)
    assert [gate.admit(WRITE, T0) for _ in range(10)] == [0] * 10  # burst: one second
    assert gate.admit(WRITE, T0) == 100
    for i in range(3):
        gate.throttled(T0 + i)
    # 10 * 0.8^3 = 5.12 units per second now
    assert gate.admit(WRITE, T0 + 2) == pytest.approx(1000 * 2 / 5.12, abs=5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: FixedRate(wcu=0),
        lambda: FixedRate(rcu=-1),
        lambda: AdaptiveRate(max_rcu=1, min_rcu=2),
        lambda: AdaptiveRate(max_rcu=10, min_wcu=0),
        lambda: Admission(FixedRate(wcu=1), max_wait=-1),
    ],
)
def test_bad_settings_are_refused(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]
