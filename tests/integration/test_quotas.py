"""Quotas end to end on moto (sync in-process, async over HTTP): spent, rejected until the
reset, reset at the boundary, session windows opened by first use, give-backs that
never cross a reset, and what reads show. The clock is injected: nothing sleeps."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import Api, Clock
from zae_limiter import Limit, RateLimitExceeded

# The test clock starts at 1_800_000_000_000 ms, 2027-01-15 08:00:00 UTC.
MIDNIGHT_MS = 1_800_057_600_000  # 2027-01-16 00:00:00 UTC
DAILY = Limit.quota("daily", 5, reset="0 0 * * *", tz="UTC")
SESSION = Limit.quota("session", 3, reset_after=timedelta(hours=1))


def _spend(api: Api, limits: list[Limit], n: int, name: str) -> None:
    for _ in range(n):
        with api.acquire("e", "api", {name: 1}, limits=limits):
            pass


def _rejected(api: Api, limits: list[Limit], name: str) -> RateLimitExceeded:
    with pytest.raises(RateLimitExceeded) as caught:
        with api.acquire("e", "api", {name: 1}, limits=limits):
            pass
    return caught.value


def test_calendar_quota_is_spent_rejected_until_the_reset_then_full(api: Api, clock: Clock) -> None:
    _spend(api, [DAILY], 5, "daily")
    assert api.available("e", "api", limits=[DAILY]) == {"daily": 0}
    error = _rejected(api, [DAILY], "daily")
    to_reset = (MIDNIGHT_MS - clock.now_ms) / 1000
    assert error.retry_after_seconds == pytest.approx(to_reset, abs=0.01)
    assert error.as_dict()["limits"][0]["retry_after_seconds"] == pytest.approx(to_reset, abs=0.01)
    wait = api.time_until_available("e", "api", {"daily": 1}, limits=[DAILY])
    assert wait == pytest.approx(to_reset, abs=0.01)
    (limit,) = error.as_dict()["limits"]
    assert (limit["kind"], limit["resets_at_ms"]) == ("quota", MIDNIGHT_MS)
    clock.now_ms = MIDNIGHT_MS - 1  # no refill inside a window, not even a token
    (again,) = _rejected(api, [DAILY], "daily").violations  # from memory or the table
    assert (again.kind, again.resets_at_ms) == ("quota", MIDNIGHT_MS)
    clock.now_ms = MIDNIGHT_MS
    assert api.available("e", "api", limits=[DAILY]) == {"daily": 5}
    _spend(api, [DAILY], 5, "daily")
    _rejected(api, [DAILY], "daily")


def test_stored_quota_is_resolved_and_shown_with_its_window(api: Api, clock: Clock) -> None:
    api.set_limits("e", [DAILY], resource="api")
    with api.acquire("e", "api", {"daily": 2}) as lease:
        assert lease.limits == (DAILY,)
    assert tuple(api.get_limits("e", resource="api")) == (DAILY,)
    (event,) = api.get_audit_events("e")
    assert event.after is not None
    assert event.after["limits"][0]["reset"] == "cron:0 0 * * *@UTC"
    (shard,) = api.get_shards("e", "api")
    assert shard.tokens == {"daily": 3} and shard.capacity == {"daily": 5}
    assert shard.resets_at_ms == {"daily": MIDNIGHT_MS}
    assert shard.full_in_ms == MIDNIGHT_MS - clock.now_ms


def test_session_quota_opens_at_first_use_and_lasts_its_length(api: Api, clock: Clock) -> None:
    clock.advance(600)  # nothing happens until the first use
    opened = clock.now_ms
    _spend(api, [SESSION], 3, "session")
    clock.advance(1800)
    error = _rejected(api, [SESSION], "session")
    assert error.retry_after_seconds == pytest.approx(1800, abs=0.01)
    assert error.violations[0].resets_at_ms == opened + 3_600_000  # the session's end
    assert api.time_until_available("e", "api", {"session": 1}, limits=[SESSION]) == (
        pytest.approx(1800, abs=0.01)
    )
    clock.now_ms = opened + 3_600_000 - 1
    _rejected(api, [SESSION], "session")
    clock.now_ms = opened + 3_600_000 + 5_000  # ended; the next use opens the next session
    assert api.available("e", "api", limits=[SESSION]) == {"session": 3}
    _spend(api, [SESSION], 1, "session")
    clock.advance(3599)
    _spend(api, [SESSION], 2, "session")
    error = _rejected(api, [SESSION], "session")
    assert error.retry_after_seconds == pytest.approx(1, abs=0.01)


def test_a_rollback_after_the_reset_gives_nothing_to_the_new_window(api: Api, clock: Clock) -> None:
    clock.now_ms = MIDNIGHT_MS - 1000
    _spend(api, [DAILY], 3, "daily")
    with pytest.raises(RuntimeError):
        with api.acquire("e", "api", {"daily": 2}, limits=[DAILY]):
            clock.now_ms = MIDNIGHT_MS + 1000
            other = api.new_client(reserve=False)
            with other.acquire("e", "api", {"daily": 4}, limits=[DAILY]):
                pass
            raise RuntimeError("the call failed after midnight")
    # The 2 went with the old window: the new one holds 5 - 4, not 3.
    assert api.available("e", "api", limits=[DAILY]) == {"daily": 1}


def test_a_rollback_inside_the_window_gives_back(api: Api, clock: Clock) -> None:
    with pytest.raises(RuntimeError):
        with api.acquire("e", "api", {"daily": 4}, limits=[DAILY]):
            raise RuntimeError("failed")
    assert api.available("e", "api", limits=[DAILY]) == {"daily": 5}
    with api.acquire("e", "api", {"daily": 1}, limits=[DAILY]) as lease:
        lease.adjust(daily=3)  # 3 more than the 1 taken
    assert api.available("e", "api", limits=[DAILY]) == {"daily": 1}


def test_a_quota_and_a_rate_limit_together(api: Api, clock: Clock) -> None:
    rpm = Limit.per_minute("rpm", 100)
    limits = [rpm, DAILY]
    api = api.new_client(reserve=False)  # every token in the bucket, none in a reserve
    for _ in range(5):
        with api.acquire("e", "api", {"rpm": 1, "daily": 1}, limits=limits):
            pass
    error = _rejected(api, limits, "daily")
    assert [v.limit_name for v in error.violations] == ["daily"]
    assert api.available("e", "api", limits=limits) == {"rpm": 95, "daily": 0}
    for _ in range(95):
        with api.acquire("e", "api", {"rpm": 1}, limits=[rpm]):
            pass
    (refilling,) = _rejected(api, [rpm], "rpm").violations
    assert (refilling.kind, refilling.resets_at_ms) == ("rate", None)  # it refills instead


def test_a_session_in_deep_debt_stays_spent_until_its_end(api: Api, clock: Clock) -> None:
    """Simulator seed 903 (session quota worlds): usage charged after the fact past twice
    the quota moved the stored value into the next millisecond's session, which read
    whole: the table offered the quota again where the session was in debt. The debt
    past the quota is not recorded; the session stays spent until its end."""
    api, other = api.new_client(reserve=False), api.new_client(reserve=False)
    opened = clock.now_ms
    with api.acquire("e", "api", {"session": 2}, limits=[SESSION]) as lease:
        with other.acquire("e", "api", {"session": 1}, limits=[SESSION]) as second:
            lease.adjust(session=5)  # 8 used of 3
            second.adjust(session=4)  # 12, planned from an image before the first
    assert api.available("e", "api", limits=[SESSION])["session"] <= 0
    _rejected(api, [SESSION], "session")
    clock.now_ms = opened + 3_600_000 - 1
    _rejected(api, [SESSION], "session")
    clock.now_ms = opened + 3_600_000
    assert api.available("e", "api", limits=[SESSION]) == {"session": 3}
    _spend(api, [SESSION], 3, "session")
    _rejected(api, [SESSION], "session")


def test_a_give_back_past_what_a_session_spent_keeps_its_session(api: Api, clock: Clock) -> None:
    """Simulator seed 1728 (session quota worlds): a lease adjusted below what it took
    gave back more than the session held spent, and moved the stored value below the
    session's start: it read as a session a millisecond older, spent twice over. The
    give-back stops at the session's start: the session is whole, and keeps its end."""
    api = api.new_client(reserve=False)
    opened = clock.now_ms
    with api.acquire("e", "api", {"session": 2}, limits=[SESSION]) as lease:
        lease.adjust(session=-3)  # 1 less than nothing
    assert api.available("e", "api", limits=[SESSION]) == {"session": 3}
    clock.now_ms = opened + 1_000
    _spend(api, [SESSION], 3, "session")
    error = _rejected(api, [SESSION], "session")
    assert error.violations[0].resets_at_ms == opened + 3_600_000, "the session it was"
