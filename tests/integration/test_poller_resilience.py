"""The stream poller on a slow engine: a timed-out read is tried again from the last
position processed, with smaller pages; giving up keeps the position for the next run.

In-process moto serves the real stream; the timeouts are botocore's own ReadTimeoutError,
raised at `before-send` on the poller's real streams client (nothing of the poller is
mocked). Its pauses go to a recorder instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from moto import mock_aws

from tests.conftest import Clock
from zae_limiter import Limit, RateLimiterUnavailable, SyncRateLimiter, SyncRepository
from zae_limiter.aggregator.plan import AggregatorConfig
from zae_limiter.aggregator.poller import DEFAULT_BATCH, READ_RETRIES, StreamPoller

RPM = Limit.per_minute("rpm", 10_000)
CALLS = 12


class SlowStream:
    """Times out the next `fail` GetRecords sends (all of them with fail=-1)."""

    def __init__(self, poller: StreamPoller) -> None:
        self.fail = 0
        self.sent = 0
        poller.streams.meta.events.register_first(
            "before-send.dynamodbstreams.GetRecords", self._send
        )

    def _send(self, **_: Any) -> None:
        self.sent += 1
        if self.fail:
            self.fail -= 1
            raise ReadTimeoutError(endpoint_url="http://engine")


@pytest.fixture
def table(table_name: str, clock: Clock) -> Iterator[str]:
    with mock_aws():
        repo = SyncRepository.open(name=table_name, create_table=True, clock=clock)
        limiter = SyncRateLimiter(repo)
        limiter.set_limits("key-1", [RPM], resource="gpt")
        for _ in range(CALLS):
            with limiter.acquire("key-1", "gpt", {"rpm": 1}):
                pass
        repo.close()
        yield table_name


def poller(table: str, clock: Clock, waits: list[float]) -> StreamPoller:
    opened = StreamPoller.open(AggregatorConfig(table=table), clock=clock)
    opened.wait = waits.append
    return opened


def consumed(table: str) -> int:
    with SyncRepository.open(name=table) as repo:
        snaps = SyncRateLimiter(repo).get_usage_snapshots("key-1", "gpt", "hourly")
    return sum(s.counters.get("rpm", 0) for s in snaps)


def test_timed_out_reads_are_retried_with_smaller_pages(table: str, clock: Clock) -> None:
    waits: list[float] = []
    slow = poller(table, clock, waits)
    faults = SlowStream(slow)
    faults.fail = 2
    stats = slow.run_forever(once=True)
    assert waits == [0.5, 1.0]  # two pauses, growing
    assert slow.batch_size == DEFAULT_BATCH // 4
    assert stats.failed == 0
    assert consumed(table) == CALLS  # every record processed once: usage is exact

    # a clean poller from the start reads exactly as many records
    clean = poller(table, clock, [])
    assert clean.run_forever(once=True).records == stats.records


def test_giving_up_keeps_the_position_and_the_next_run_resumes(table: str, clock: Clock) -> None:
    waits: list[float] = []
    first = poller(table, clock, waits)
    first.batch_size = 3
    faults = SlowStream(first)
    original = first.handle

    def handle_then_stall(records: list[dict[str, Any]]) -> None:
        original(records)
        faults.fail = -1  # from the second page on, the engine never answers in time

    first.handle = handle_then_stall  # type: ignore[method-assign]
    with pytest.raises(RateLimiterUnavailable, match="position is kept"):
        first.run_forever(once=True)
    assert len(waits) == READ_RETRIES
    read = first.stats.records
    assert read > 0
    position = dict(first.positions)

    second = poller(table, clock, [])
    second.positions = position  # as a checkpoint file would carry it
    second.run_forever(once=True)
    assert consumed(table) == CALLS  # nothing lost, nothing counted twice
    clean = poller(table, clock, [])
    assert read + second.stats.records == clean.run_forever(once=True).records
