"""A partition emulator: a loopback HTTP proxy that throttles hot DynamoDB partitions.

moto and DynamoDB Local never throttle. Real DynamoDB does: one partition takes about
1,000 writes per second and answers `ProvisionedThroughputExceededException` past that.
The proxy forwards DynamoDB JSON requests to a local endpoint and, like DynamoDB, counts
writes per partition key per second; a write that would pass the per-partition limit
is answered with HTTP 400 and never forwarded. Reads pass through.

    with PartitionEmulator(engine.endpoint_url, writes_per_second=50) as emu:
        client = boto3.client("dynamodb", endpoint_url=emu.endpoint_url, ...)
        ...
        emu.stats().throttled_writes

The limit is a fixed window per wall-clock second (`shape="fixed"`) or a continuously
refilled token bucket (`shape="smooth"`, DynamoDB's own shape); stats are kept per
wall-clock second (`time.time()`), so they line up with a caller's own timestamps.
Each item a request writes counts one write on its partition; a multi-item request
(TransactWriteItems, BatchWriteItem) is throttled whole if any of its partitions is full.
Throttled requests consume nothing.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

TARGET_PREFIX = "DynamoDB_20120810."
WRITE_OPERATIONS = frozenset(
    {"UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
)
THROTTLE_TYPE = "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
THROTTLE_MESSAGE = (
    "The level of configured provisioned throughput for the table was exceeded "
    "(partition emulator: {limit} writes/s per partition)"
)
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding"})


# ---------------------------------------------------------------- request parsing (pure)


def operation(target: str | None) -> str:
    """`UpdateItem` from `X-Amz-Target: DynamoDB_20120810.UpdateItem` ("" if absent)."""
    if not target:
        return ""
    return target.removeprefix(TARGET_PREFIX)


def _key_value(item: Any, pk_attribute: str) -> str | None:
    if not isinstance(item, Mapping):
        return None
    attr = item.get(pk_attribute)
    if not isinstance(attr, Mapping):
        return None
    for kind in ("S", "N", "B"):
        if kind in attr:
            return str(attr[kind])
    return None


def _transact_keys(body: Mapping[str, Any], pk_attribute: str) -> Iterable[str | None]:
    for entry in body.get("TransactItems", []):
        for kind in ("Put", "Update", "Delete", "ConditionCheck"):
            part = entry.get(kind)
            if isinstance(part, Mapping):
                yield _key_value(part.get("Item") or part.get("Key"), pk_attribute)


def _batch_keys(body: Mapping[str, Any], pk_attribute: str) -> Iterable[str | None]:
    for requests in body.get("RequestItems", {}).values():
        for request in requests:
            if "PutRequest" in request:
                yield _key_value(request["PutRequest"].get("Item"), pk_attribute)
            elif "DeleteRequest" in request:
                yield _key_value(request["DeleteRequest"].get("Key"), pk_attribute)


def written_partitions(op: str, body: Mapping[str, Any], pk_attribute: str = "PK") -> list[str]:
    """The partition key of every item `op` writes, one entry per item (may repeat).

    Reads and unknown operations write nothing. A ConditionCheck in a transaction is
    counted: DynamoDB charges it as a write.
    """
    if op in ("UpdateItem", "DeleteItem"):
        found: Iterable[str | None] = [_key_value(body.get("Key"), pk_attribute)]
    elif op == "PutItem":
        found = [_key_value(body.get("Item"), pk_attribute)]
    elif op == "TransactWriteItems":
        found = _transact_keys(body, pk_attribute)
    elif op == "BatchWriteItem":
        found = _batch_keys(body, pk_attribute)
    else:
        return []
    return [pk for pk in found if pk is not None]


# ---------------------------------------------------------------- the window (pure)


@dataclass(frozen=True, slots=True)
class Count:
    """Writes forwarded to DynamoDB and writes refused with a throttle."""

    forwarded: int = 0
    throttled: int = 0


@dataclass(frozen=True, slots=True)
class EmulatorStats:
    """A snapshot of the emulator's counters. Seconds are whole epoch seconds."""

    writes_per_second: int
    reads: int
    forwarded_writes: int
    throttled_writes: int
    throttled_requests: int
    by_partition: dict[str, Count] = field(default_factory=dict)
    by_second: dict[int, Count] = field(default_factory=dict)
    by_second_partition: dict[int, dict[str, Count]] = field(default_factory=dict)

    def throttled_for(self, prefix: str = "") -> int:
        """Throttled writes on partitions whose key starts with `prefix`."""
        return sum(c.throttled for pk, c in self.by_partition.items() if pk.startswith(prefix))

    def second(self, epoch_second: int, prefix: str = "") -> Count:
        """One second's counts, over partitions whose key starts with `prefix`."""
        parts = self.by_second_partition.get(epoch_second, {})
        chosen = [c for pk, c in parts.items() if pk.startswith(prefix)]
        return Count(sum(c.forwarded for c in chosen), sum(c.throttled for c in chosen))


FIXED = "fixed"
SMOOTH = "smooth"


class PartitionWindow:
    """Per-partition write limits; thread-safe, no I/O.

    `admit(pks, now)` decides one request: it is admitted only if every partition it
    writes has room for its writes; then they are counted. A refused request counts as
    throttled on each of its partitions and consumes nothing. Two shapes of room:

    - "fixed": at most `writes_per_second` writes in each wall-clock second. Under
      sustained overload the first writes of a second win and every later one loses.
    - "smooth": a token bucket per partition, `writes_per_second` deep, refilled
      continuously (DynamoDB's own shape): under overload a write wins about as often
      as its share of the traffic, whenever in the second it comes.

    `table_writes_per_second` adds a limit on the whole table (a smooth bucket that deep,
    over every partition's writes), as a provisioned table at its capacity or an account
    limit throttles: then every key is throttled, however its writes are spread.
    """

    def __init__(
        self,
        writes_per_second: int,
        shape: str = FIXED,
        table_writes_per_second: int | None = None,
    ) -> None:
        if writes_per_second < 1:
            raise ValueError(f"writes_per_second must be at least 1, got {writes_per_second}")
        if shape not in (FIXED, SMOOTH):
            raise ValueError(f"shape must be {FIXED!r} or {SMOOTH!r}, got {shape!r}")
        _check_table_limit(table_writes_per_second)
        self.writes_per_second = writes_per_second
        self.table_writes_per_second = table_writes_per_second
        self.shape = shape
        self._table: tuple[float, float] | None = None  # (tokens, as of) of the table
        self._lock = threading.Lock()
        self._second = -1
        self._current: Counter[str] = Counter()
        self._buckets: dict[str, tuple[float, float]] = {}  # pk -> (tokens, as of)
        self._reads = 0
        self._throttled_requests = 0
        # epoch second -> partition -> [forwarded, throttled]
        self._history: dict[int, dict[str, list[int]]] = {}

    def admit(self, pks: Sequence[str], now: float) -> bool:
        wanted = Counter(pks)
        with self._lock:
            table = self._table_room(len(pks), now)
            if table is None:
                second, ok = int(now), False
            elif self.shape == SMOOTH:
                second, ok = int(now), self._smooth(wanted, now)
            else:
                second, ok = self._fixed(wanted, now)
            if ok and table is not None and self.table_writes_per_second is not None:
                self._table = (table[0] - len(pks), table[1])
            row = self._history.setdefault(second, {})
            for pk, n in wanted.items():
                cell = row.setdefault(pk, [0, 0])
                cell[0 if ok else 1] += n
            if not ok and wanted:
                self._throttled_requests += 1
            return ok

    def _fixed(self, wanted: Counter[str], now: float) -> tuple[int, bool]:
        # Windows only move forward; a late request counts in the current one.
        if int(now) > self._second:
            self._second = int(now)
            self._current = Counter()
        limit = self.writes_per_second
        ok = all(self._current[pk] + n <= limit for pk, n in wanted.items())
        if ok:
            self._current.update(wanted)
        return self._second, ok

    def _table_room(self, writes: int, now: float) -> tuple[float, float] | None:
        """The table bucket's (tokens, as of) now, or None when it cannot take `writes`."""
        rate = self.table_writes_per_second
        if rate is None or not writes:
            return (0.0, now)
        tokens, since = self._table if self._table is not None else (float(rate), now)
        as_of = max(now, since)
        tokens = min(float(rate), tokens + (as_of - since) * rate)
        self._table = (tokens, as_of)
        return (tokens, as_of) if tokens >= writes else None

    def _smooth(self, wanted: Counter[str], now: float) -> bool:
        rate = float(self.writes_per_second)
        levels: dict[str, tuple[float, float]] = {}
        for pk in wanted:
            tokens, since = self._buckets.get(pk, (rate, now))
            as_of = max(now, since)  # a late request refills nothing
            levels[pk] = (min(rate, tokens + (as_of - since) * rate), as_of)
        ok = all(levels[pk][0] >= n for pk, n in wanted.items())
        for pk, n in wanted.items():
            tokens, as_of = levels[pk]
            self._buckets[pk] = (tokens - n if ok else tokens, as_of)
        return ok

    def count_read(self) -> None:
        with self._lock:
            self._reads += 1

    def stats(self) -> EmulatorStats:
        with self._lock:
            history = {
                s: {pk: Count(*c) for pk, c in row.items()} for s, row in self._history.items()
            }
            reads, throttled_requests = self._reads, self._throttled_requests
        by_partition: dict[str, Count] = {}
        by_second: dict[int, Count] = {}
        for second, row in sorted(history.items()):
            by_second[second] = Count(
                sum(c.forwarded for c in row.values()), sum(c.throttled for c in row.values())
            )
            for pk, c in row.items():
                was = by_partition.get(pk, Count())
                by_partition[pk] = Count(was.forwarded + c.forwarded, was.throttled + c.throttled)
        return EmulatorStats(
            writes_per_second=self.writes_per_second,
            reads=reads,
            forwarded_writes=sum(c.forwarded for c in by_second.values()),
            throttled_writes=sum(c.throttled for c in by_second.values()),
            throttled_requests=throttled_requests,
            by_partition=by_partition,
            by_second=by_second,
            by_second_partition=history,
        )

    def reset(self) -> None:
        """Forget every count (the current window too)."""
        with self._lock:
            self._second = -1
            self._current = Counter()
            self._buckets = {}
            self._table = None
            self._reads = 0
            self._throttled_requests = 0
            self._history = {}


# ---------------------------------------------------------------- the proxy (I/O)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: botocore reuses its connections
    disable_nagle_algorithm = True  # headers and body go out in two writes
    server: _ProxyServer
    _upstream: http.client.HTTPConnection | None = None

    def do_POST(self) -> None:
        self.server.emulator._handle(self)

    do_GET = do_POST

    def finish(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        with contextlib.suppress(OSError):  # the client (or stop()) closed it first
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: a benchmark sends thousands of requests

    def upstream(self, fresh: bool = False) -> http.client.HTTPConnection:
        if fresh and self._upstream is not None:
            self._upstream.close()
            self._upstream = None
        if self._upstream is None:
            host, port = self.server.emulator.upstream_address
            self._upstream = http.client.HTTPConnection(host, port, timeout=30)
        return self._upstream


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins every connection thread

    def __init__(self, address: tuple[str, int], emulator: PartitionEmulator) -> None:
        self.emulator = emulator
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self.stopping = False
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Wake every connection thread blocked on an idle keep-alive socket."""
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up (botocore does, then retries) is not news.
        if not self.stopping and not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class PartitionEmulator:
    """A throttling proxy in front of a local DynamoDB endpoint; see the module doc."""

    def __init__(
        self,
        upstream_url: str,
        writes_per_second: int = 1000,
        *,
        shape: str = FIXED,
        table_writes_per_second: int | None = None,
        pk_attribute: str = "PK",
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be a plain http:// URL, got {upstream_url!r}")
        self.upstream_url = upstream_url
        self.upstream_address = (parts.hostname, parts.port or 80)
        self.window = PartitionWindow(writes_per_second, shape, table_writes_per_second)
        self.pk_attribute = pk_attribute
        self._clock = clock
        self._address = (host, port)
        self._server: _ProxyServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> PartitionEmulator:
        if self._server is not None:
            return self
        self._server = _ProxyServer(self._address, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="partition-emulator",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close every connection, and join every thread it started."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.stopping = True
        server.shutdown()
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def __enter__(self) -> PartitionEmulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the partition emulator is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- the knobs and counters

    @property
    def writes_per_second(self) -> int:
        return self.window.writes_per_second

    @writes_per_second.setter
    def writes_per_second(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"writes_per_second must be at least 1, got {value}")
        self.window.writes_per_second = value

    @property
    def table_writes_per_second(self) -> int | None:
        return self.window.table_writes_per_second

    @table_writes_per_second.setter
    def table_writes_per_second(self, value: int | None) -> None:
        _check_table_limit(value)
        with self.window._lock:
            self.window.table_writes_per_second = value
            self.window._table = None

    def stats(self) -> EmulatorStats:
        return self.window.stats()

    def reset(self) -> None:
        self.window.reset()

    # -- one request

    def _handle(self, handler: _Handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        op = operation(handler.headers.get("X-Amz-Target"))
        if op in WRITE_OPERATIONS:
            pks = _parse_partitions(op, body, self.pk_attribute)
            if not self.window.admit(pks, self._clock()):
                _reply_throttled(handler, self.window.writes_per_second)
                return
        elif op:
            self.window.count_read()
        self._forward(handler, body)

    def _forward(self, handler: _Handler, body: bytes) -> None:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        for attempt in (0, 1):
            connection = handler.upstream(fresh=attempt > 0)
            try:
                connection.request(handler.command, handler.path, body, headers)
                response = connection.getresponse()
                data = response.read()
                break
            except (OSError, http.client.HTTPException):
                if attempt:  # the upstream is gone: tell the client, as a gateway would
                    _reply(handler, 502, b"", {"Content-Type": "text/plain"})
                    return
        out = {
            k: v
            for k, v in response.getheaders()
            if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"
        }
        _reply(handler, response.status, data, out, response.reason)


def _check_table_limit(value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"table_writes_per_second must be at least 1 (or None), got {value}")


def _parse_partitions(op: str, body: bytes, pk_attribute: str) -> list[str]:
    try:
        decoded = json.loads(body or b"{}")
    except ValueError:
        return []  # let the upstream reject what it cannot parse
    return written_partitions(op, decoded, pk_attribute) if isinstance(decoded, dict) else []


def _reply_throttled(handler: _Handler, limit: int) -> None:
    payload = {"__type": THROTTLE_TYPE, "message": THROTTLE_MESSAGE.format(limit=limit)}
    headers = {
        "Content-Type": "application/x-amz-json-1.0",
        "x-amzn-RequestId": f"emulated-{time.monotonic_ns()}",
    }
    _reply(handler, 400, json.dumps(payload).encode(), headers)


def _reply(
    handler: _Handler,
    status: int,
    data: bytes,
    headers: Mapping[str, str],
    reason: str | None = None,
) -> None:
    handler.send_response(status, reason)
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
