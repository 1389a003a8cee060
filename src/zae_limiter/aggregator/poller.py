"""Poll a table's stream and feed it to the aggregator: for local engines (no Lambda).

`zae-limiter aggregator run` uses it. It finds the stream (DescribeTable), lists its
shards (DescribeStream), reads each with GetShardIterator / GetRecords, and runs every
batch through the same code as the Lambda handler (`handler.process_batch`).

- Shard lineage: a shard is read only once its parent is fully read (closed and drained,
  or gone from the stream), so an item's changes are seen in order.
- Position: the last sequence number processed per shard, kept in memory, and in a JSON
  checkpoint file when one is given (written after every batch). Without a checkpoint a
  new poller starts at TRIM_HORIZON; reading records again is harmless, because usage
  writes are fenced on sequence numbers and the other writes are conditional.
- Failures: a batch whose writes partly failed is retried from its first failed record
  (`max_retries` times, with a short pause); after that the records are logged and
  skipped, as the Lambda's dead-letter queue would take them.
- `once=True` drains what is in the stream now and returns; otherwise it polls until
  stopped (Ctrl-C: the checkpoint is saved and it returns cleanly).
- Slow engines: this is background work, so its clients are patient (a long read
  timeout), and a stream call that still times out is tried again (`read_retries`
  times, with a growing pause) from the last position processed, asking for half as
  many records each time: a local engine's GetRecords takes time per record, and on a
  busy machine a full page can outlast any timeout. Giving up keeps the position, so
  the next run resumes there.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from zae_limiter.aggregator.archive import S3Archive
from zae_limiter.aggregator.handler import archive_from_env, process_batch
from zae_limiter.aggregator.plan import AggregatorConfig
from zae_limiter.errors import (
    NOT_FOUND,
    RateLimiterUnavailable,
    TableNotFoundError,
    ZaeLimiterError,
)

log = logging.getLogger("zae_limiter.aggregator")
Clock = Callable[[], int]
T = TypeVar("T")

#: Records asked for per GetRecords; halved (down to MIN_BATCH) after a timeout.
DEFAULT_BATCH = 200
MIN_BATCH = 10
#: Seconds a stream or table call may take before it counts as timed out.
PATIENT_READ_TIMEOUT_S = 60.0
READ_RETRIES = 4
#: Errors that mean "slow or briefly unreachable", worth another try.
SLOW_ERRORS = (ReadTimeoutError, ConnectTimeoutError, EndpointConnectionError,
               ConnectionClosedError)  # fmt: skip


@dataclass
class PollStats:
    batches: int = 0
    records: int = 0
    failed: int = 0
    skipped: int = 0


@dataclass
class StreamPoller:
    config: AggregatorConfig
    dynamodb: Any
    streams: Any
    run: Callable[[Any], Any]
    clock: Clock
    checkpoint: Path | None = None
    batch_size: int = DEFAULT_BATCH
    max_retries: int = 3
    read_retries: int = READ_RETRIES
    #: How to wait between tries of a slow call (a test passes a recorder).
    wait: Callable[[float], None] = time.sleep
    positions: dict[str, str] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    stats: PollStats = field(default_factory=PollStats)
    stream_arn: str | None = None
    #: Where expired audit events go (ZAEL_AUDIT_ARCHIVE_BUCKET); None: nowhere.
    archive: S3Archive | None = None

    @classmethod
    def open(
        cls,
        config: AggregatorConfig,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        checkpoint: Path | None = None,
        clock: Clock | None = None,
    ) -> StreamPoller:
        import boto3

        from zae_limiter.capacity import CapacityMeter
        from zae_limiter.clock_watch import wall_clock_ms
        from zae_limiter.drivers import SyncRunner

        session = boto3.session.Session()
        dynamodb = session.client("dynamodb", **patient_client_kwargs(region, endpoint_url))
        streams = session.client("dynamodbstreams", **patient_client_kwargs(region, endpoint_url))
        runner = SyncRunner(dynamodb, CapacityMeter(), config.table)
        poller = cls(config, dynamodb, streams, runner.run, clock or wall_clock_ms)
        poller.checkpoint = checkpoint
        poller.archive = archive_from_env(endpoint_url=endpoint_url)
        poller.load()
        return poller

    # ------------------------------------------------------------ stream discovery
    def find_stream(self) -> str:
        from botocore.exceptions import ClientError

        try:
            table = self._patiently(
                "DescribeTable",
                lambda: self.dynamodb.describe_table(TableName=self.config.table)["Table"],
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == NOT_FOUND:
                raise TableNotFoundError(self.config.table) from error
            raise
        arn = table.get("LatestStreamArn")
        if not arn:
            raise ZaeLimiterError(f"table {self.config.table!r} has no stream enabled")
        if self.stream_arn not in (None, arn):
            self.positions, self.finished = {}, set()  # a new stream: start over
        self.stream_arn = str(arn)
        return self.stream_arn

    def list_shards(self, arn: str) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        params: dict[str, Any] = {"StreamArn": arn}
        while True:
            desc = self._patiently(
                "DescribeStream",
                lambda: self.streams.describe_stream(**params)["StreamDescription"],
            )
            page = desc.get("Shards") or []
            shards.extend(page)
            last = desc.get("LastEvaluatedShardId")
            if not last or not page or last == params.get("ExclusiveStartShardId"):
                return shards  # the end, or a page that did not move on (no busy loop)
            params["ExclusiveStartShardId"] = last

    @staticmethod
    def readable(shards: Sequence[Mapping[str, Any]], finished: set[str]) -> list[str]:
        """Shards to read now: unfinished, with no parent left to read first."""
        known = {s["ShardId"] for s in shards}
        return [
            s["ShardId"]
            for s in shards
            if s["ShardId"] not in finished
            and (s.get("ParentShardId") is None or s["ParentShardId"] not in known
                 or s["ParentShardId"] in finished)
        ]  # fmt: skip

    # ------------------------------------------------------------ reading
    def _iterator(self, arn: str, shard_id: str) -> str | None:
        params: dict[str, Any] = {"StreamArn": arn, "ShardId": shard_id}
        position = self.positions.get(shard_id)
        if position is None:
            params["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            params.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=position)
        found = self._patiently(
            "GetShardIterator", lambda: self.streams.get_shard_iterator(**params)
        )
        return found.get("ShardIterator")  # type: ignore[no-any-return]

    def _patiently(
        self, what: str, call: Callable[[], T], retry: Callable[[], None] = lambda: None
    ) -> T:
        """`call()`, tried again after a timeout (`retry()` first prepares the next try)."""
        for attempt in range(self.read_retries + 1):
            try:
                return call()
            except SLOW_ERRORS as error:
                if attempt == self.read_retries:
                    raise RateLimiterUnavailable(
                        f"{what} on the stream of {self.config.table!r} timed out "
                        f"{attempt + 1} times ({type(error).__name__}); the engine is too "
                        "busy or gone. The position is kept: run the aggregator again to "
                        "resume from it."
                    ) from error
                pause = min(8.0, 0.5 * 2**attempt)
                log.warning("%s timed out (%s); trying again in %.1fs", what, error, pause)
                self.wait(pause)
                retry()
        raise AssertionError("unreachable")  # pragma: no cover

    def _records(self, arn: str, shard_id: str, iterator: str) -> dict[str, Any]:
        """One GetRecords page. After a timeout the iterator is fetched again from the
        last position processed, and half as many records are asked for."""
        current = [iterator]

        def again() -> None:
            self.batch_size = max(MIN_BATCH, self.batch_size // 2)
            current[0] = self._iterator(arn, shard_id) or current[0]

        return self._patiently(
            "GetRecords",
            lambda: self.streams.get_records(ShardIterator=current[0], Limit=self.batch_size),
            again,
        )

    def drain_shard(self, arn: str, shard_id: str, stop: threading.Event) -> int:
        """Read a shard up to its current end; returns the records processed."""
        iterator = self._iterator(arn, shard_id)
        seen = 0
        while iterator and not stop.is_set():
            page = self._records(arn, shard_id, iterator)
            records = page.get("Records") or []
            last = self.positions.get(shard_id)
            if records and last is not None and _seq(records[-1]) <= int(last):
                break  # the iterator did not move on (seen on local engines): no busy loop
            if records:
                self.handle(records)
                self.positions[shard_id] = records[-1]["dynamodb"]["SequenceNumber"]
                self.save()
                seen += len(records)
            iterator = page.get("NextShardIterator")
            if not records:
                break
        if not iterator:
            self.finished.add(shard_id)
            self.save()
        return seen

    def handle(self, records: list[dict[str, Any]]) -> None:
        """One batch, retried from its first failed record; then skipped (logged)."""
        self.stats.batches += 1
        self.stats.records += len(records)
        batch = records
        for attempt in range(self.max_retries + 1):
            failed = process_batch(batch, self.config, self.run, self.clock(), self.archive)
            if not failed:
                return
            first = min(int(seq) for seq in failed)
            batch = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) >= first]
            if attempt < self.max_retries:
                time.sleep(min(2.0, 0.1 * 2**attempt))
        self.stats.failed += len(batch)
        log.error(
            "skipping %d stream records after %d retries (first %s)",
            len(batch), self.max_retries, batch[0]["dynamodb"]["SequenceNumber"],
        )  # fmt: skip

    def poll_once(self, stop: threading.Event | None = None) -> int:
        """One pass over every readable shard, parents first; records processed."""
        stop = stop or threading.Event()
        arn = self.find_stream()
        total = 0
        progressed = True
        while progressed and not stop.is_set():
            shards = self.list_shards(arn)
            before = set(self.finished)
            for shard_id in self.readable(shards, self.finished):
                total += self.drain_shard(arn, shard_id, stop)
            progressed = self.finished != before  # a parent closed: its children are next
        return total

    def run_forever(
        self, once: bool, interval: float = 1.0, stop: threading.Event | None = None
    ) -> PollStats:
        """Poll until stopped (or, with `once`, until the stream is drained)."""
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                got = self.poll_once(stop)
                if once:
                    break
                if not got:
                    stop.wait(interval)
        except KeyboardInterrupt:
            log.info("stopped")
        finally:
            self.save()
        return self.stats

    # ------------------------------------------------------------ checkpoint
    def load(self) -> None:
        if self.checkpoint is None or not self.checkpoint.exists():
            return
        data = json.loads(self.checkpoint.read_text())
        self.stream_arn = data.get("stream_arn")
        self.positions = dict(data.get("positions") or {})
        self.finished = set(data.get("finished") or [])

    def save(self) -> None:
        if self.checkpoint is None:
            return
        data = {
            "table": self.config.table,
            "stream_arn": self.stream_arn,
            "positions": self.positions,
            "finished": sorted(self.finished),
        }
        tmp = self.checkpoint.with_suffix(self.checkpoint.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.checkpoint)


def patient_client_kwargs(region: str | None, endpoint_url: str | None) -> dict[str, Any]:
    """Client arguments for background work: a long read timeout, one attempt per call
    (the poller retries itself, from its own position)."""
    from botocore.config import Config

    from zae_limiter.repository import client_kwargs

    kwargs = client_kwargs(region, endpoint_url)
    kwargs["config"] = kwargs["config"].merge(
        Config(
            connect_timeout=10,
            read_timeout=PATIENT_READ_TIMEOUT_S,
            retries={"total_max_attempts": 1, "mode": "standard"},
        )
    )
    return kwargs


def _seq(record: Mapping[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])
