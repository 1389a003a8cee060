"""Scheduled limits end to end on moto (sync in-process, async over HTTP): the stored
schedule picks the limit in force from the injected clock, the switch at a boundary
reads nothing, and a bucket crossing a boundary admits exactly what an ideal bucket
whose numbers change at that instant admits (exactness across a schedule boundary)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.conftest import Api, Clock
from tests.exactness_model import IdealBucket
from zae_limiter import Limit, RateLimitExceeded
from zae_limiter.limits import next_change

# The test clock starts at 1_800_000_000_000 ms, 2027-01-15 08:00:00 UTC.
NINE_MS = 1_800_003_600_000  # 09:00 UTC
TEN_MS = NINE_MS + 3_600_000  # 10:00 UTC
DAY = Limit.per_minute("rpm", 10)
RUSH = Limit.per_minute("rpm", 50)
SCHEDULED = DAY.during("0 9 * * *", "0 10 * * *", RUSH)


def _admitted(api: Api, at_ms: int, clock: Clock, n: int) -> int:
    clock.now_ms = at_ms
    admitted = 0
    for _ in range(n):
        try:
            with api.acquire("e", "api", {"rpm": 1}):
                admitted += 1
        except RateLimitExceeded:
            pass
    return admitted


class ScheduledIdeal(IdealBucket):
    """The ideal bucket whose numbers change at `boundary_ms`: the old numbers refill up to
    the instant, the tokens are clamped to the new capacity, the new numbers refill on."""

    def __init__(self, before: Limit, after: Limit, boundary_ms: int, at_ms: int) -> None:
        super().__init__(before, at_ms)
        self.after, self.boundary_ms = after, boundary_ms

    def refill(self, at_ms: int) -> None:
        if self.boundary_ms is not None and at_ms >= self.boundary_ms:
            super().refill(self.boundary_ms)
            self.capacity = Fraction(self.after.capacity)
            after = self.after
            self.per_ms = Fraction(after.refill_amount, after.refill_period_seconds * 1000)
            self.tokens = min(self.tokens, self.capacity)
            self.boundary_ms = None  # type: ignore[assignment]
        super().refill(at_ms)


@pytest.mark.parametrize(
    ("boundary_ms", "before", "after", "gap_after_ms"),
    [(NINE_MS, DAY, RUSH, 20_000), (TEN_MS, RUSH, DAY, 5_000)],
    ids=["rate-rises", "rate-falls"],
)
def test_a_bucket_crossing_a_schedule_boundary_admits_what_an_ideal_bucket_admits(
    api: Api, clock: Clock, boundary_ms: int, before: Limit, after: Limit, gap_after_ms: int
) -> None:
    api.set_limits("e", [SCHEDULED], resource="api")
    start = boundary_ms - 120_000
    ideal = ScheduledIdeal(before, after, boundary_ms, start)
    # Drained 10 s before the boundary, then a burst `gap_after_ms` after it: the tokens
    # between come from both sets of numbers, each over its own part of the gap.
    plan = [(start, 60), (boundary_ms - 10_000, 60), (boundary_ms + gap_after_ms, 60)]
    for at_ms, n in plan:
        expected = sum(ideal.take(1, at_ms) for _ in range(n))
        assert _admitted(api, at_ms, clock, n) == expected, (at_ms - boundary_ms, expected)
    clock.now_ms = boundary_ms + 1_800_000  # half an hour on: full, by the new numbers
    assert api.available("e", "api") == {"rpm": after.capacity}


def test_the_switch_reads_no_config_and_each_client_switches_by_its_own_clock(
    api: Api, clock: Clock
) -> None:
    api.set_limits("e", [SCHEDULED], resource="api")
    clock.now_ms = NINE_MS - 30_000
    with api.acquire("e", "api", {"rpm": 1}):
        pass
    assert api.available("e", "api") == {"rpm": 9}
    clock.now_ms = NINE_MS + 20_000  # within the config cache's 60 s: the schedule is in it
    with api.meter() as m:
        with api.acquire("e", "api", {"rpm": 20}):  # more than the day's 10
            pass
    # The acquire's own write only: no config read at the boundary.
    assert set(m.ops) == {"update_item"}, m.ops
    # 10 at 09:00 (the day's numbers refilled it up to then), 16.7 more at 50/min since.
    assert api.available("e", "api") == {"rpm": 6}
    # A client judges the boundary by its own clock: 1 ms before it, the day's numbers.
    assert api.available("other", "api", limits=[SCHEDULED]) == {"rpm": 50}
    clock.now_ms = NINE_MS - 1
    assert api.available("fresh", "api", limits=[SCHEDULED]) == {"rpm": 10}


def test_a_schedule_is_stored_audited_and_shown_with_its_next_change(
    api: Api, clock: Clock
) -> None:
    api.set_limits("e", [SCHEDULED], resource="api")
    (stored,) = api.get_limits("e", resource="api")
    assert stored == SCHEDULED
    assert stored.describe() == "10/min; 50/min from '0 9 * * *' to '0 10 * * *' UTC"
    assert next_change(stored, clock.now_ms) == (NINE_MS, RUSH)
    assert next_change(stored, NINE_MS) == (TEN_MS, DAY)
    (event, *_) = api.get_audit_events("e")
    assert event.after["limits"][0]["schedule"] == [
        {
            "start": "0 9 * * *",
            "end": "0 10 * * *",
            "tz": "UTC",
            "capacity": 50,
            "refill_amount": 50,
            "refill_period_seconds": 60,
        }
    ]
