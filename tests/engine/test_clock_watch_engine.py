"""The library's clock watch on a real endpoint: the `Date` headers of the answers it gets
anyway bound its clock's offset, on both faces (the sync and the async lean path), and a
clock surely past the threshold is logged once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Repository, SyncRepository
from zae_limiter.clock_watch import ClockStats
from zae_limiter.flows.records.version import read_version

#: Long enough for the server's second to tick at least once.
SPAN_S = 1.3


def skewed(offset_ms: int) -> Callable[[], int]:
    return lambda: time.time_ns() // 1_000_000 + offset_ms


def _holds(stats: ClockStats, offset_ms: int) -> None:
    assert stats.low_ms is not None and stats.high_ms is not None
    assert stats.low_ms <= offset_ms + 5 and offset_ms - 5 <= stats.high_ms
    assert stats.dates >= 2, "a tick of the server's second was seen"
    assert stats.high_ms - stats.low_ms < 200  # loopback round trips, not a whole second


def test_a_sync_client_two_seconds_ahead_sees_it_and_warns_once(
    engine_env: EngineEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    clock = skewed(2000)
    with caplog.at_level(logging.WARNING, logger="zae_limiter"):
        repo = SyncRepository.open(name=unique_name(), create_table=True, clock=clock)
        try:
            until = time.monotonic() + SPAN_S
            while time.monotonic() < until:
                repo.run(read_version(repo.state))
            stats = repo.get_clock_stats()
        finally:
            repo.close()
    _holds(stats, 2000)
    assert stats.warned
    assert len([r for r in caplog.records if "clock" in r.getMessage()]) == 1


def test_an_async_client_on_time_sees_no_offset_and_stays_quiet(
    engine_env: EngineEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    async def measure() -> ClockStats:
        repo = await Repository.open(name=unique_name(), create_table=True)
        try:
            until = time.monotonic() + SPAN_S
            while time.monotonic() < until:
                await repo.run(read_version(repo.state))
            return repo.get_clock_stats()
        finally:
            await repo.close()

    with caplog.at_level(logging.WARNING, logger="zae_limiter"):
        stats = asyncio.run(measure())
    _holds(stats, 0)
    assert not stats.warned
    assert not [r for r in caplog.records if "clock" in r.getMessage()]
