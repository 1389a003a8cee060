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

Like DynamoDB since 2025, a throttle names whose limit refused it: a `ThrottlingReasons`
list with `TableWriteKeyRangeThroughputExceeded` (a partition's own limit) or
`TableWriteProvisionedThroughputExceeded` (`table_writes_per_second`). Pass
`throttling_reasons=False` for an endpoint that gives none (before 2025): a client then
has to tell the two apart from what it measured.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from zae_limiter.errors import TABLE_WRITE_KEY_RANGE, TABLE_WRITE_PROVISIONED
from zae_limiter.testing.partitions import (
    FIXED,
    PARTITION,
    SMOOTH,
    TARGET_PREFIX,
    WRITE_OPERATIONS,
    Count,
    EmulatorStats,
    PartitionWindow,
    check_table_limit,
    operation,
    parse_partitions,
    written_partitions,
)

__all__ = [
    "FIXED",
    "SMOOTH",
    "TARGET_PREFIX",
    "WRITE_OPERATIONS",
    "Count",
    "EmulatorStats",
    "PartitionEmulator",
    "PartitionWindow",
    "operation",
    "written_partitions",
]

THROTTLE_TYPE = "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
THROTTLE_MESSAGE = (
    "The level of configured provisioned throughput for the table was exceeded "
    "(partition emulator: {limit} writes/s per partition)"
)
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding"})


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
        throttling_reasons: bool = True,
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
        self.throttling_reasons = throttling_reasons
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
        check_table_limit(value)
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
            pks = parse_partitions(op, body, self.pk_attribute)
            refused = self.window.refusal(pks, self._clock())
            self.window.count_operation(op, refused is not None)
            if refused is not None:
                reason = TABLE_WRITE_KEY_RANGE if refused == PARTITION else TABLE_WRITE_PROVISIONED
                reasons = [reason] if self.throttling_reasons else []
                _reply_throttled(handler, self.window.writes_per_second, reasons, body)
                return
        elif op:
            self.window.count_read(op)
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


def _reply_throttled(handler: _Handler, limit: int, reasons: list[str], body: bytes) -> None:
    payload: dict[str, Any] = {
        "__type": THROTTLE_TYPE,
        "message": THROTTLE_MESSAGE.format(limit=limit),
    }
    if reasons:
        resource = f"arn:aws:dynamodb:local:000000000000:table/{_table_name(body)}"
        payload["ThrottlingReasons"] = [{"reason": r, "resource": resource} for r in reasons]
    headers = {
        "Content-Type": "application/x-amz-json-1.0",
        "x-amzn-RequestId": f"emulated-{time.monotonic_ns()}",
    }
    _reply(handler, 400, json.dumps(payload).encode(), headers)


def _table_name(body: bytes) -> str:
    """The table a refused request named (a throttle's reasons carry its ARN)."""
    with contextlib.suppress(ValueError):
        request = json.loads(body)
        if isinstance(request, dict) and isinstance(request.get("TableName"), str):
            return str(request["TableName"])
    return ""


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
