"""Keep-alive connections to one endpoint for asyncio, with one timer per transport.

A plain-HTTP endpoint given as an IP address (DynamoDB Local, a moto server, a local
proxy to DynamoDB) gets connections of our own: a non-blocking socket connected with
`connect_ex`, read from a `loop.add_reader` callback. asyncio's `create_connection`
costs about a fifth of a call when each call opens a connection (moto closes every
one): address checks, a transport object and several `call_soon` hops. Host names and
TLS keep asyncio's own transports (resolution and the TLS handshake are its job).

One timer per transport, not per exchange: each exchange is cut at the earliest of the
caller's deadline and the current phase's timeout (connect, then read), and the timer is
armed for the earliest such time of all exchanges, re-armed lazily (`_Alarm`). When
the caller's deadline cut the exchange the builtin `TimeoutError` is raised; the
connect and read timeouts raise botocore's types, as the sync transport does. A
connection an exchange did not finish is closed, never reused.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import socket
import sys
from typing import Any

from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from zae_limiter.wire.http import Head, ProtocolError, body_of, request_bytes, split_head
from zae_limiter.wire.transport import MAX_IDLE, Endpoint, Response, ip_family

CONNECT, READ, DEADLINE = "connect", "read", "deadline"
_PENDING = (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN)


class _Alarm:
    """One timer for every exchange of a transport on one loop.

    Armed for the earliest time an exchange must be cut, and not cancelled when that
    exchange ends in time: the next ones (each 1 s or so from its start) need no earlier
    wake-up, so back-to-back calls share one timer a second instead of arming and
    cancelling one each. When it fires it cuts what is due and re-arms for the rest.
    """

    __slots__ = ("at", "loop", "timer", "watches")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.watches: set[_Watch] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.at = 0.0  # when `timer` fires

    def need(self, at: float) -> None:
        """Some exchange must be woken by loop time `at`."""
        timer = self.timer
        if timer is not None:
            if self.at <= at:
                return  # it fires earlier and re-arms for what is left
            timer.cancel()
        self.at = at
        self.timer = self.loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self.timer, at = None, self.at
        later: float | None = None
        for watch in list(self.watches):
            limit = watch.limit
            if limit is None:
                continue
            if limit <= at:
                watch.expire()
            elif later is None or limit < later:
                later = limit
        if later is not None:
            self.need(later)


class _Watch:
    """What cuts one exchange: the earliest of the caller's deadline and the current
    phase's timeout (connect, then read). On expiry it fails the future being awaited."""

    __slots__ = ("alarm", "cause", "deadline", "future", "limit", "stage")

    def __init__(self, alarm: _Alarm, deadline: float | None) -> None:
        self.alarm = alarm
        self.deadline = deadline  # loop time, or None
        self.limit: float | None = None  # when the current phase expires
        self.stage = CONNECT  # what the exchange is doing
        self.cause = DEADLINE  # what ends it if the alarm fires
        self.future: asyncio.Future[Any] | None = None
        alarm.watches.add(self)

    def phase(self, now: float, timeout: float | None, cause: str) -> None:
        self.stage = cause
        at = None if timeout is None else now + timeout
        deadline = self.deadline
        if deadline is not None and (at is None or deadline <= at):
            at, cause = deadline, DEADLINE
        self.limit, self.cause = at, cause
        if at is not None:
            self.alarm.need(at)

    def expire(self) -> None:
        future = self.future
        if future is not None and not future.done():
            future.set_exception(TimeoutError(self.cause))

    def wait(self) -> asyncio.Future[Any]:
        self.future = future = self.alarm.loop.create_future()
        return future

    def cancel(self) -> None:
        self.alarm.watches.discard(self)


class _Receiver:
    """Bytes in, one response out: the waiting exchange is woken once a whole response
    is buffered (no stream objects, no per-read wake-ups)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.eof = False
        self.waiter: asyncio.Future[tuple[Head, bytes]] | None = None
        #: The head of the response being received and where its body starts, once read.
        self.split: tuple[Head, int] | None = None

    def received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def ended(self) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        buffer, eof = self.buffer, self.eof
        try:
            split = self.split
            if split is None:
                split = self.split = split_head(buffer, eof)
                if split is None:
                    return
            found = body_of(split[0], buffer, split[1], eof)
        except ProtocolError as error:
            waiter.set_exception(error)
            return
        if found is not None:
            head = split[0]
            content, used = found
            del buffer[:used]
            if buffer:
                head.keep_alive = False
            waiter.set_result((head, content))

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def open(self) -> bool:
        raise NotImplementedError

    @property
    def usable(self) -> bool:
        """Idle and still open: the peer has not closed it nor sent anything unasked."""
        return not self.eof and not self.buffer and self.open()

    async def exchange(self, request: bytes, watch: _Watch) -> tuple[Head, bytes]:
        self.waiter = waiter = watch.wait()
        self.split = None
        try:
            self.write(request)
            head, content = await waiter
            return head, content
        finally:
            self.waiter = None

    def close(self) -> None:
        raise NotImplementedError


class _Streamed(_Receiver, asyncio.Protocol):
    """A connection on an asyncio transport (TLS, host names)."""

    def __init__(self) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received(data)

    def eof_received(self) -> bool | None:
        self.ended()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended()

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Plain(_Receiver):
    """A plain-HTTP connection on a non-blocking socket of our own."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        super().__init__()
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.unsent = b""
        loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # reset: the exchange fails as a closed connection
        if data:
            self.received(data)
            return
        self.loop.remove_reader(self.fd)
        self.ended()

    def write(self, data: bytes) -> None:
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < len(data):  # a full send buffer: the rest when writable
            self.unsent = data[sent:]
            self.loop.add_writer(self.fd, self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            sent = len(self.unsent)  # the read side reports the broken connection
        self.unsent = self.unsent[sent:]
        if not self.unsent:
            self.loop.remove_writer(self.fd)

    def open(self) -> bool:
        return self.fd >= 0

    def close(self) -> None:
        if self.fd < 0:
            return
        self.loop.remove_reader(self.fd)
        if self.unsent:
            self.loop.remove_writer(self.fd)
        self.fd = -1
        self.sock.close()


async def _connect_plain(
    loop: asyncio.AbstractEventLoop, address: tuple[str, int], family: int, watch: _Watch
) -> _Plain:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        code = sock.connect_ex(address)
        if code in _PENDING:
            if not _writable_now(sock):
                ready = watch.wait()
                loop.add_writer(sock.fileno(), _finish, ready)
                try:
                    await ready
                finally:
                    loop.remove_writer(sock.fileno())
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, os.strerror(code))
        return _Plain(loop, sock)
    except BaseException:
        sock.close()
        raise


def _writable_now(sock: socket.socket) -> bool:
    """Whether a connection in progress is already set up (on loopback it usually is by
    the time `connect_ex` returns): then no writer callback and no loop turn are needed."""
    poll = select.poll()
    poll.register(sock, select.POLLOUT)
    return bool(poll.poll(0))


def _finish(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)


class AsyncTransport:
    """Keep-alive connections for one event loop."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._idle: list[_Receiver] = []
        self._alarm: _Alarm | None = None
        host = endpoint.address[0]
        # Windows' default (proactor) loop has no reader callbacks: asyncio's transports.
        own = endpoint.tls is None and sys.platform != "win32"
        self._family = ip_family(host) if own else None

    async def _connect(self, loop: asyncio.AbstractEventLoop, watch: _Watch) -> _Receiver:
        if self._family is not None:
            return await _connect_plain(loop, self.endpoint.address, self._family, watch)
        host, port = self.endpoint.address
        tls = self.endpoint.tls
        async with asyncio.timeout_at(watch.limit):
            _, connection = await loop.create_connection(
                _Streamed, host, port, ssl=tls, server_hostname=host if tls else None
            )
        return connection

    def _checkout(self) -> _Receiver | None:
        while self._idle:
            idle = self._idle.pop()
            if idle.usable:
                return idle
            idle.close()
        return None

    async def send(
        self, headers: dict[str, str], body: bytes, deadline: float | None = None
    ) -> Response:
        """One exchange; `deadline`: the loop time by which it must end (TimeoutError)."""
        ep = self.endpoint
        loop = asyncio.get_running_loop()
        alarm = self._alarm
        if alarm is None or alarm.loop is not loop:
            self._alarm = alarm = _Alarm(loop)
        watch = _Watch(alarm, deadline)
        connection = self._checkout()
        try:
            if connection is None:
                watch.phase(loop.time(), ep.connect_timeout, CONNECT)
                connection = await self._connect(loop, watch)
            watch.phase(loop.time(), ep.read_timeout, READ)
            head, content = await connection.exchange(request_bytes(ep.host, headers, body), watch)
        except BaseException as error:
            if connection is not None:
                connection.close()
            mapped = _mapped(error, watch, ep.url)
            if mapped is error:
                raise
            raise mapped from error
        finally:
            watch.cancel()
        if head.keep_alive and len(self._idle) < MAX_IDLE:
            self._idle.append(connection)
        else:
            connection.close()
        return head.status, head.headers, content

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def _mapped(error: BaseException, watch: _Watch, url: str) -> BaseException:
    """botocore's exception for a failed exchange; the caller's deadline stays builtin."""
    if isinstance(error, TimeoutError):
        if watch.cause == DEADLINE:
            return TimeoutError("the call's deadline passed")
        if watch.cause == CONNECT:
            return ConnectTimeoutError(endpoint_url=url, error=error)
        return ReadTimeoutError(endpoint_url=url, error=error)
    if isinstance(error, ProtocolError) or (isinstance(error, OSError) and watch.stage == READ):
        return ConnectionClosedError(endpoint_url=url, error=error)
    if isinstance(error, OSError):
        return EndpointConnectionError(endpoint_url=url, error=error)
    return error  # cancelled, or anything else: as it came
