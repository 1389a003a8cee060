"""A throttled acquire's waits end at the run's deadline (docs/resilience.md): the sync
driver cuts every sleep at it, on a simulated clock (the driver's `time` replaced)."""

from __future__ import annotations

import pytest

from tests.unit._flowkit import T0, make_level, make_state
from zae_limiter import drivers
from zae_limiter.capacity import CapacityMeter
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows.reserves.book import ReserveBook
from zae_limiter.flows.scaling import throttled


class SimTime:
    """The clock the driver reads; a sleep moves it instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return int(self.now * 1e9)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_wait_for_a_reserve_ends_at_the_runs_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = SimTime()
    monkeypatch.setattr(drivers, "time", sim)
    state = make_state()
    state.reserves = ReserveBook()  # no reserve ever comes
    flow = throttled.wait_for_reserve(state, make_level(), throttled.Tries([0], state.jitter), T0)
    runner = drivers.SyncRunner(None, CapacityMeter(), "table")
    assert throttled.RESERVE_WAIT_MS / 1000 > 0.2
    with pytest.raises(RateLimiterUnavailable) as raised:
        runner.run(flow, timeout=0.2)
    assert "deadline" in str(raised.value)
    assert sum(sim.slept) == pytest.approx(0.2)  # until the deadline, never past it
