"""Reading a table's stream for `top`: every open shard from LATEST, nothing written.

DynamoDB Streams serve about two concurrent readers per shard; the aggregator is one,
so `top` is a guest: one GetRecords per shard per poll, and when the stream throttles
it (LimitExceededException and kin), it waits, exponentially longer with jitter, before
it asks again. GetRecords is billed per call, not per record read.

Shards come and go (DynamoDB closes a shard after some hours and opens its children);
the list is read again every `relist_ms`, and a child found then is read from its start.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from zae_limiter.errors import TableNotFoundError, ZaeLimiterError

log = logging.getLogger("zae_limiter.top")
# Unconfigured, a warning would go to stderr through logging's last resort and tear the
# live view; the view counts the throttles in its title instead.
log.addHandler(logging.NullHandler())

#: What the stream answers when it is read too often.
THROTTLED = frozenset(
    {"LimitExceededException", "ThrottlingException", "ProvisionedThroughputExceededException"}
)
EXPIRED = "ExpiredIteratorException"
RECORDS_PER_CALL = 1000


class NoStreamError(ZaeLimiterError):
    """The table has no stream: `top` has nothing to read."""

    def __init__(self, table: str) -> None:
        super().__init__(
            f"table {table!r} has no stream, so top has nothing to read; zae-limiter "
            "tables are created with one (NEW_AND_OLD_IMAGES), re-create it with deploy"
        )


@dataclass
class Backoff:
    """Exponential back-off with full jitter, reset by a call that went through."""

    base_ms: int = 500
    cap_ms: int = 20_000
    failures: int = 0
    until_ms: int = 0
    random: Callable[[], float] = random.random

    def throttled(self, now_ms: int) -> int:
        self.failures += 1
        ceiling = min(self.cap_ms, self.base_ms * 2 ** (self.failures - 1))
        wait = int(ceiling * (0.5 + 0.5 * self.random()))
        self.until_ms = now_ms + wait
        return wait

    def ok(self) -> None:
        self.failures = 0

    def waiting(self, now_ms: int) -> bool:
        return now_ms < self.until_ms


@dataclass
class StreamReader:
    """Reads the stream of `table`; `poll(now_ms)` returns the records that arrived."""

    table: str
    dynamodb: Any
    streams: Any
    relist_ms: int = 60_000
    backoff: Backoff = field(default_factory=Backoff)
    #: Shard id -> its next iterator (None: the shard is closed and read to its end).
    iterators: dict[str, str | None] = field(default_factory=dict)
    stream_arn: str | None = None
    listed_ms: int | None = None
    calls: int = 0
    throttles: int = 0

    def open(self, now_ms: int) -> None:
        """Find the stream, start every open shard at LATEST."""
        try:
            table = self.dynamodb.describe_table(TableName=self.table)["Table"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise TableNotFoundError(self.table) from error
            raise
        arn = table.get("LatestStreamArn")
        enabled = (table.get("StreamSpecification") or {}).get("StreamEnabled", bool(arn))
        if not arn or not enabled:
            raise NoStreamError(self.table)
        self.stream_arn = str(arn)
        self._list(now_ms, first=True)

    def _shards(self) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        params: dict[str, Any] = {"StreamArn": self.stream_arn}
        while True:
            self.calls += 1
            desc = self.streams.describe_stream(**params)["StreamDescription"]
            page = desc.get("Shards") or []
            shards.extend(page)
            last = desc.get("LastEvaluatedShardId")
            if not last or not page or last == params.get("ExclusiveStartShardId"):
                return shards
            params["ExclusiveStartShardId"] = last

    def _list(self, now_ms: int, first: bool = False) -> None:
        self.listed_ms = now_ms
        for shard in self._shards():
            shard_id = shard["ShardId"]
            if shard_id in self.iterators:
                continue
            closed = "EndingSequenceNumber" in (shard.get("SequenceNumberRange") or {})
            if first and closed:
                continue  # read to its end before we came: nothing new will arrive there
            # At the start, only what arrives from now on; a shard opened later, all of it.
            self.iterators[shard_id] = self._iterator(shard_id, "LATEST" if first else
                                                      "TRIM_HORIZON")  # fmt: skip

    def _iterator(self, shard_id: str, kind: str) -> str | None:
        self.calls += 1
        found = self.streams.get_shard_iterator(
            StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType=kind
        )
        return found.get("ShardIterator")  # type: ignore[no-any-return]

    @property
    def shard_count(self) -> int:
        return sum(1 for it in self.iterators.values() if it is not None)

    def poll(self, now_ms: int) -> list[dict[str, Any]]:
        """One GetRecords per open shard; nothing while backing off after a throttle."""
        if self.backoff.waiting(now_ms):
            return []
        records: list[dict[str, Any]] = []
        try:
            if self.listed_ms is None or now_ms - self.listed_ms >= self.relist_ms:
                self._list(now_ms)
            for shard_id, iterator in list(self.iterators.items()):
                if iterator is not None:
                    records.extend(self._read(shard_id, iterator))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in THROTTLED:
                raise
            self.throttles += 1
            wait = self.backoff.throttled(now_ms)
            log.warning("the stream throttled top; reading again in %.1fs", wait / 1000)
            return records  # what the shards read before the throttle gave
        self.backoff.ok()
        return records

    def _read(self, shard_id: str, iterator: str) -> list[dict[str, Any]]:
        self.calls += 1
        try:
            page = self.streams.get_records(ShardIterator=iterator, Limit=RECORDS_PER_CALL)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != EXPIRED:
                raise
            self.iterators[shard_id] = self._iterator(shard_id, "LATEST")
            return []
        following = page.get("NextShardIterator")
        self.iterators[shard_id] = following
        if following is None:
            self.listed_ms = None  # the shard closed: its children are to be found now
        return list(page.get("Records") or [])


def open_reader(
    table: str, region: str | None = None, endpoint_url: str | None = None
) -> StreamReader:
    """A reader on `table` with its own DynamoDB and DynamoDB Streams clients."""
    import boto3
    from botocore.config import Config

    from zae_limiter.repository import client_kwargs

    session = boto3.session.Session()
    kwargs = client_kwargs(region, endpoint_url)
    # One attempt per call: a throttle comes back to the reader, which backs off itself.
    kwargs["config"] = kwargs["config"].merge(Config(retries={"total_max_attempts": 1}))
    return StreamReader(
        table, session.client("dynamodb", **kwargs), session.client("dynamodbstreams", **kwargs)
    )
