"""A token reserve on a calendar quota at its reset (docs/quotas.md, "Reserves at a
reset"), both faces on moto, the clock injected: a client that holds a reserve when the
boundary passes never spends it in the new window (its next acquire goes to the table
and is charged there), what it spent in the old window is not charged to the new one,
and nothing it gives back or adjusts after the boundary adds to the new window. The new
window admits exactly its quota."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import Api, Clock
from zae_limiter import Limit, RateLimitExceeded

MIDNIGHT_MS = 1_800_057_600_000  # 2027-01-16 00:00:00 UTC (the test clock: 2027-01-15)
DAILY = [Limit.quota("daily", 100, reset="0 0 * * *", tz="UTC")]
KEY = ("e", "api")
SESSION_MS = 60_000
SESSION = [Limit.quota("daily", 100, reset_after=timedelta(milliseconds=SESSION_MS))]


def _take(api: Api, n: int = 1, limits: list[Limit] = DAILY) -> None:
    with api.acquire("e", "api", {"daily": n}, limits=limits):
        pass


def _drain(api: Api, limits: list[Limit] = DAILY) -> int:
    """Acquire 1 at a time until refused; how many were admitted."""
    admitted = 0
    while True:
        try:
            _take(api, 1, limits)
        except RateLimitExceeded:
            return admitted
        admitted += 1


def _holding(api: Api) -> int:
    """Tokens the client's reserve of the bucket holds unspent (whole tokens)."""
    held = api.repo.state.reserves.holding(KEY)
    return 0 if held is None else held.left.get("daily", 0) // 1000


def _give_back(api: Api) -> None:
    api.run(api.repo.return_reserves(True))


def _hot_before_midnight(api: Api, clock: Clock) -> None:
    """The client takes a reserve in the old window and spends part of it there."""
    clock.now_ms = MIDNIGHT_MS - 1000
    for _ in range(8):
        _take(api)
    assert _holding(api) > 0, "the bucket is hot: a reserve is held"
    assert api.limiter.get_reserve_stats().hits > 0, "and served from"


def test_a_reserve_held_at_the_reset_is_never_spent_and_its_spending_stays_behind(
    api: Api, clock: Clock
) -> None:
    _hot_before_midnight(api, clock)
    hits = api.limiter.get_reserve_stats().hits
    clock.now_ms = MIDNIGHT_MS + 1000
    _take(api)  # after the reset: to the table, not from the old reserve
    stats = api.limiter.get_reserve_stats()
    assert stats.hits == hits, "a reserve of the old window is never spent in the new one"
    assert stats.returns >= 1, "it went back with that write"
    _give_back(api)
    # The new window is charged its own admission only: the old window's spending from
    # the reserve went with the old window, and its unspent tokens are back.
    assert api.available("e", "api", limits=DAILY) == {"daily": 99}
    other = api.new_client(reserve=False)
    assert _drain(other) == 99


def test_a_reserve_held_at_a_sessions_end_is_never_spent_in_the_next_session(
    api: Api, clock: Clock
) -> None:
    """The same rule at a session's end, which the reserve learns from the item its
    take left (flows/reserves/ops.py `session_end`)."""
    opened = MIDNIGHT_MS - SESSION_MS + 1000  # another client opens the session
    clock.now_ms = opened
    _take(api.new_client(reserve=False), 1, SESSION)
    clock.now_ms = MIDNIGHT_MS  # a second before its end, this client takes a reserve
    for _ in range(8):
        _take(api, 1, SESSION)
    assert _holding(api) > 0 and api.limiter.get_reserve_stats().hits > 0
    hits = api.limiter.get_reserve_stats().hits
    clock.now_ms = opened + SESSION_MS + 1000
    _take(api, 1, SESSION)  # opens the next session: to the table, not from the reserve
    assert api.limiter.get_reserve_stats().hits == hits, "never spent past its session"
    _give_back(api)
    # The next session is charged its own admission only.
    assert api.available("e", "api", limits=SESSION) == {"daily": 99}
    assert _drain(api.new_client(reserve=False), SESSION) == 99


def test_changes_after_the_reset_to_a_lease_served_from_a_reserve_stay_exact(
    api: Api, clock: Clock
) -> None:
    _hot_before_midnight(api, clock)
    other = api.new_client(reserve=False)
    with api.acquire("e", "api", {"daily": 1}, limits=DAILY) as adjusted:
        with pytest.raises(RuntimeError):
            with api.acquire("e", "api", {"daily": 2}, limits=DAILY):
                clock.now_ms = MIDNIGHT_MS + 1000
                raise RuntimeError("failed after midnight: its 2 went with the old window")
        adjusted.adjust(daily=3)  # 3 more, used after midnight: the new window's
    drained = _drain(other)
    _give_back(api)
    drained += _drain(other)
    assert drained + 3 == 100, "the new window admits exactly its quota"
