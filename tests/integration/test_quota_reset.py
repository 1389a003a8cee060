"""An operator's reset of a quota (`reset_bucket`, `zae-limiter entity reset`), the clock
injected, on moto (and on DynamoDB Local: tests/engine/test_quota_reset_engine.py): a
calendar quota is whole for the rest of its window, and a sharded session quota is left
with no session open on any shard, so the next take opens one that every shard shares
and that admits exactly the quota."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Clock, Tables
from tests.integration.test_quota_shards import drain
from tests.integration.test_session_shards import LENGTH_MS, SESSION, SHARDS, T0, _raise
from zae_limiter import Limit, SyncRateLimiter

HOURLY = Limit.quota("daily", 40, reset="0 * * * *")  # the name `drain` takes
HOUR_MS = 1_800_000_000_000 // 3_600_000 * 3_600_000 + 3_600_000  # the next full hour


def make_limiter(tables: Tables, table_name: str, clock: Clock, limit: Limit) -> SyncRateLimiter:
    repo = tables.open(table_name, create_table=True, clock=clock, reserve=False)
    limiter = SyncRateLimiter(repo)
    limiter.set_limits("e", [limit], resource="api")
    return limiter


def made_on_four_shards(tables: Tables, limiter: SyncRateLimiter, table_name: str) -> int:
    """Shard 0 raised to 4 shards and every shard made by takes; how many were taken."""
    with limiter.acquire("e", "api", {"daily": 1}):
        pass
    admin = tables.open(table_name)
    _raise(tables, admin.state.namespace, table_name, 1, SHARDS, T0)
    admin.close()
    taken = 1
    while len(limiter.get_shards("e", "api")) < SHARDS:
        with limiter.acquire("e", "api", {"daily": 1}):
            taken += 1
    return taken


@pytest.fixture
def sharded(table_name: str, tables: Tables) -> Iterator[tuple[SyncRateLimiter, Clock]]:
    """An entity of 4 shards, every one made, in a session opened at T0."""
    clock = Clock(T0)
    limiter = make_limiter(tables, table_name, clock, SESSION)
    clock.now_ms = T0 + 1_000
    assert made_on_four_shards(tables, limiter, table_name) < 40
    yield limiter, clock
    limiter.close()


def _ends(limiter: SyncRateLimiter) -> dict[int, int | None]:
    return {s.shard_id: s.resets_at_ms.get("daily") for s in limiter.get_shards("e", "api")}


def test_a_reset_calendar_quota_is_whole_until_its_window_ends(
    table_name: str, tables: Tables
) -> None:
    """Before the fix, a reset wrote "full at now" as for a refilling limit: for a
    calendar quota that read as the time since the window's start, spent (12 million
    tokens of debt for a quota of 10 reset 10 minutes into its hour)."""
    clock = Clock(HOUR_MS - 600_000)
    limiter = make_limiter(tables, table_name, clock, HOURLY)
    assert made_on_four_shards(tables, limiter, table_name) < 40
    assert limiter.reset_bucket("e", "api", reason="support ticket") == SHARDS
    assert limiter.available("e", "api") == {"daily": 40}
    assert set(_ends(limiter).values()) == {HOUR_MS}, "the window is the calendar's"
    assert drain(limiter) == 40, "the rest of the window: the whole quota, no more"
    clock.now_ms = HOUR_MS
    assert drain(limiter) == 40
    limiter.close()


def test_a_reset_session_quota_has_no_session_until_the_next_take(
    sharded: tuple[SyncRateLimiter, Clock],
) -> None:
    """Before the fix, a reset opened a session at the reset on every shard it read: a
    session nobody's take opened, ending a session's length after the reset whenever
    the next take came. Against the ideal session quota (opened by the first take after
    the reset): the session the next take opens admits exactly 40, on every shard."""
    limiter, clock = sharded
    clock.now_ms = T0 + 10_000
    assert limiter.reset_bucket("e", "api", reason="support ticket") == SHARDS
    assert limiter.available("e", "api") == {"daily": 40}
    assert set(_ends(limiter).values()) == {None}, "no shard holds a session"

    opened = T0 + 10_000 + LENGTH_MS - 5_000  # the next take, 55 s after the reset
    clock.now_ms = opened
    admitted = drain(limiter)
    clock.now_ms = opened + LENGTH_MS // 2  # past where a session opened by the reset ends
    admitted += drain(limiter)
    assert admitted == 40, f"{admitted} admitted in the session the first take opened"
    assert set(_ends(limiter).values()) == {opened + LENGTH_MS}, "one session on every shard"
    clock.now_ms = opened + LENGTH_MS
    assert drain(limiter) == 40
