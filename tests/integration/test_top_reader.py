"""`top`'s stream reader on moto's real stream: LATEST only, every record once, and a
throttled stream answered by backing off (the throttle is raised at `before-send` on the
reader's real streams client; nothing of the reader is replaced)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from zae_limiter import Limit, SyncRateLimiter, SyncRepository
from zae_limiter.top.rates import Tally
from zae_limiter.top.reader import Backoff, NoStreamError, StreamReader, open_reader

T0 = 1_780_000_000_000


class Throttle:
    """The next `fail` GetRecords are answered as a busy stream answers them."""

    def __init__(self, reader: StreamReader) -> None:
        self.fail = 0
        self.sent = 0
        reader.streams.meta.events.register_first(
            "before-send.dynamodbstreams.GetRecords", self._send
        )

    def _send(self, **_: Any) -> None:
        self.sent += 1
        if self.fail:
            self.fail -= 1
            error = {"Code": "LimitExceededException", "Message": "too many readers"}
            raise ClientError({"Error": error}, "GetRecords")


@pytest.fixture
def limiter(table_name: str) -> Iterator[SyncRateLimiter]:
    with mock_aws():
        repo = SyncRepository.open(name=table_name, create_table=True, reserve=False)
        limiter = SyncRateLimiter(repo)
        limiter.set_resource_defaults("gpt", [Limit.per_minute("rpm", 6000)])
        yield limiter
        repo.close()


def take(limiter: SyncRateLimiter, entity: str, times: int) -> None:
    for _ in range(times):
        with limiter.acquire(entity, "gpt", {"rpm": 1}):
            pass


def consumed(records: list[dict[str, Any]], entity: str) -> int:
    tally = Tally(T0 - 10_000)
    tally.add(records, T0)
    rows = [r for r in tally.snapshot(T0) if r.entity_id == entity]
    return round(rows[0].limits[0].rate_10s * 10) if rows else 0


def test_only_what_is_written_after_opening_is_read(
    limiter: SyncRateLimiter, table_name: str
) -> None:
    take(limiter, "before", 3)
    reader = open_reader(table_name)
    reader.open(T0)
    take(limiter, "after", 4)
    records = reader.poll(T0)
    assert consumed(records, "after") == 4 and consumed(records, "before") == 0
    assert reader.poll(T0 + 1000) == []  # each record once


def test_a_throttled_stream_is_read_again_after_a_growing_pause(
    limiter: SyncRateLimiter, table_name: str
) -> None:
    reader = open_reader(table_name)
    reader.backoff = Backoff(base_ms=500, random=lambda: 1.0)
    reader.open(T0)
    throttle = Throttle(reader)
    take(limiter, "hot", 5)
    throttle.fail = 2
    assert reader.poll(T0) == [] and reader.backoff.until_ms == T0 + 500
    sent = throttle.sent
    assert reader.poll(T0 + 499) == [] and throttle.sent == sent  # no call while waiting
    assert reader.poll(T0 + 500) == [] and reader.backoff.until_ms == T0 + 1500  # doubled
    records = reader.poll(T0 + 1500)
    assert consumed(records, "hot") == 5  # nothing lost while backing off
    assert reader.throttles == 2 and reader.backoff.failures == 0


def test_the_pause_is_jittered_and_capped() -> None:
    low = Backoff(base_ms=500, random=lambda: 0.0).throttled(0)
    high = Backoff(base_ms=500, random=lambda: 1.0).throttled(0)
    assert (low, high) == (250, 500)
    backoff = Backoff(base_ms=500, cap_ms=4000, random=lambda: 1.0)
    assert [backoff.throttled(0) for _ in range(6)] == [500, 1000, 2000, 4000, 4000, 4000]


def test_a_table_without_a_stream_is_a_clear_error(table_name: str) -> None:
    with mock_aws():
        boto3.client("dynamodb").create_table(
            TableName=table_name, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        )  # fmt: skip
        with pytest.raises(NoStreamError, match="has no stream"):
            open_reader(table_name).open(T0)


def test_the_throttle_test_catches_a_reader_that_does_not_wait(
    limiter: SyncRateLimiter, table_name: str
) -> None:
    from tests.mutants import must_fail, mutant

    with mutant(Backoff, "waiting", lambda self, now_ms: False):
        must_fail(test_a_throttled_stream_is_read_again_after_a_growing_pause, limiter,
                  table_name)  # fmt: skip
