"""The tail of a quota's window with token reserves on (docs/quotas.md, "Reserves near a
quota's end"), on moto with the clock injected.

Nothing refills a quota before its reset, so tokens a reserve holds while its holder
gets no requests (a starved process, a quiet client) are out of the window while every
other client is refused: DynamoDB Local's 8 x 300 run admitted 998 or 999 of 1,000 when a
loaded machine starved a holder. So a quota's reserve leaves `QUOTA_BEHIND` (16) times
itself behind, and a refusal while reserves hold tokens is remembered only briefly, so
that what a holder gives back is seen by the clients it refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from tests.conftest import Clock
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.flows.write import grants

MIDNIGHT_MS = 1_800_057_600_000  # 2027-01-16 00:00:00 UTC
QUOTA = 400
DAILY = [Limit.quota("daily", QUOTA, reset="0 0 * * *", tz="UTC")]


def _admit(limiter: SyncRateLimiter) -> bool:
    try:
        with limiter.acquire("e", "api", {"daily": 1}, limits=DAILY):
            return True
    except RateLimitExceeded:
        return False


@pytest.fixture
def table(table_name: str) -> Iterator[str]:
    with mock_aws():
        yield table_name


def test_a_quota_reserve_leaves_sixteen_times_itself_behind(table: str) -> None:
    """A hot client drains the quota alone: after every reserve it takes, the table
    holds at least `QUOTA_BEHIND` times what the reserve holds, so the last tokens are
    taken one write each; and the client alone admits the whole quota."""
    clock = Clock(MIDNIGHT_MS - 60_000)
    holder = SyncRepository.open(name=table, create_table=True, clock=clock)
    reader = SyncRateLimiter(SyncRepository.open(name=table, clock=clock, reserve=False))
    limiter = SyncRateLimiter(holder)
    admitted = takes = 0
    while True:
        clock.now_ms += 1
        before = holder.get_reserve_stats().takes
        if not _admit(limiter):
            break
        admitted += 1
        if holder.get_reserve_stats().takes == before:
            continue
        takes += 1
        held = holder.get_reserve_stats().held["daily"]
        left = reader.available("e", "api", limits=DAILY)["daily"]
        assert left >= grants.QUOTA_BEHIND * held, f"a reserve of {held} left {left} behind"
    assert takes > 1, "the client was hot: reserves were taken"
    assert admitted == QUOTA
    holder.close()


def _drain(limiter: SyncRateLimiter, clock: Clock) -> int:
    admitted = 0
    while True:
        clock.now_ms += 1
        if not _admit(limiter):
            return admitted
        admitted += 1


def test_a_refusal_while_reserves_hold_tokens_sees_them_come_back(table: str) -> None:
    """A client refused while another client's reserve holds the quota's last tokens
    remembers the refusal briefly only (`HELD_RECHECK_MS`), not to the reset: when the
    holder gives them back (here it closes), the refused client is admitted them."""
    clock = Clock(MIDNIGHT_MS - 60_000)
    holder = SyncRepository.open(name=table, create_table=True, clock=clock)
    other = SyncRateLimiter(SyncRepository.open(name=table, clock=clock, reserve=False))
    hot = _drain_some(SyncRateLimiter(holder), clock, 8)
    held = holder.get_reserve_stats().held.get("daily", 0)
    assert held > 0, "the holder is hot: a reserve is held"
    drained = _drain(other, clock)
    holder.close()  # its unspent tokens go back to the table
    clock.now_ms += grants.HELD_RECHECK_MS
    assert _drain(other, clock) == held, "the refused client is admitted what came back"
    assert hot + drained + held == QUOTA


def _drain_some(limiter: SyncRateLimiter, clock: Clock, n: int) -> int:
    for _ in range(n):
        clock.now_ms += 1
        assert _admit(limiter)
    return n
