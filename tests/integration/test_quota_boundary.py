"""Quotas where clients cross a boundary together, on in-process moto, each client on its
own clock (sequential steps: the interleaving is the test's). The guarantees of
docs/guarantees.md that tests/mutants/test_quota_mutants.py shows these catch:

- a reset happens once: two clients whose images show the old window both take at the
  new one; the second's reset must fail its condition and be taken as an ADD;
- a take planned in one window never lands in another: a client whose clock is still
  in a spent session is refused, though a faster clock already opened the next one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from moto import mock_aws

from tests.conftest import Clock
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository

MIDNIGHT_MS = 1_800_057_600_000  # 2027-01-16 00:00:00 UTC, after the test clocks' start
DAILY = Limit.quota("daily", 5, reset="0 0 * * *")
SESSION = Limit.quota("session", 3, reset_after=timedelta(minutes=1))


class Two:
    """Two clients of one table, each with its own clock, reserves off (every take is
    one write, so the steps are the writes)."""

    def __init__(self, table: str) -> None:
        self.clocks = [Clock(), Clock()]
        self.repos = [
            SyncRepository.open(name=table, create_table=i == 0, clock=c, reserve=False)
            for i, c in enumerate(self.clocks)
        ]
        self.limiters = [SyncRateLimiter(repo) for repo in self.repos]

    def take(self, who: int, limit: Limit, n: int) -> None:
        with self.limiters[who].acquire("e", "api", {limit.name: n}, limits=[limit]):
            pass

    def left(self, limit: Limit, who: int = 0) -> int:
        return int(self.limiters[who].available("e", "api", limits=[limit])[limit.name])


@pytest.fixture
def two(table_name: str) -> Iterator[Two]:
    with mock_aws():
        pair = Two(table_name)
        yield pair
        for repo in pair.repos:
            repo.close()


def test_two_clients_crossing_the_boundary_reset_once(two: Two) -> None:
    for clock in two.clocks:
        clock.now_ms = MIDNIGHT_MS - 60_000
    two.take(0, DAILY, 2)
    two.take(1, DAILY, 2)  # both clients' images now show the old window
    for clock in two.clocks:
        clock.now_ms = MIDNIGHT_MS + 1000
    two.take(0, DAILY, 3)  # resets: the new window holds 2
    with pytest.raises(RateLimitExceeded) as caught:
        two.take(1, DAILY, 3)  # a second reset would erase the first client's 3
    assert caught.value.violations[0].available == 2
    assert two.left(DAILY) == 2


def test_a_client_behind_a_session_boundary_does_not_spend_the_next_session(two: Two) -> None:
    slow, fast = two.clocks
    opened = slow.now_ms
    two.take(0, SESSION, 3)  # the slow client opens and spends the first session
    slow.now_ms = opened + 60_000 - 10  # still the first session, by its clock
    fast.now_ms = opened + 60_000 + 10  # past it: the next use opens the second
    two.take(1, SESSION, 1)
    with pytest.raises(RateLimitExceeded) as caught:
        two.take(0, SESSION, 1)
    # it waits until the second session has begun by its own clock
    assert caught.value.retry_after_seconds == pytest.approx(0.02, abs=0.001)
    assert two.left(SESSION, who=1) == 2
