"""Keep-alive connections to one endpoint, sync (sockets) and async (asyncio streams).

Settings come from the regular client's HTTP session, so both paths connect alike: the
connect and read timeouts, TLS verification with the same CA bundle (`verify`,
`AWS_CA_BUNDLE`), the client certificate. A request that a proxy must carry is not ours:
`Endpoint.direct` is False and the lean clients hand it to the session itself.

Like botocore (one attempt, `Retry(False)`), nothing is retried. An idle connection the
server has closed is noticed before it is used (as urllib3 does) and dropped, so a
request is only ever written once. Failures raise botocore's own exception types, so the
driver maps them exactly as it maps the regular client's.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.httpsession import get_cert_path
from urllib3.util.wait import wait_for_read

from zae_limiter.wire.http import Head, ProtocolError, chunk_size, parse_head, request_bytes

MAX_IDLE = 32
Response = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    host: str  # the Host header
    address: tuple[str, int]
    tls: ssl.SSLContext | None
    connect_timeout: float | None
    read_timeout: float | None
    direct: bool  # False: a proxy applies, the session carries the request

    @classmethod
    def of(cls, url: str, session: Any, connect: float | None, read: float | None) -> Endpoint:
        parts = urlsplit(url)
        secure = parts.scheme == "https"
        port = parts.port or (443 if secure else 80)
        hostname = parts.hostname or ""
        host = parts.netloc.rpartition("@")[2]
        proxied = session._proxy_config.proxy_url_for(url) is not None
        tls = _tls_context(session) if secure else None
        return cls(url, host, (hostname, port), tls, connect, read, not proxied)


def _tls_context(session: Any) -> ssl.SSLContext:
    verify = session._verify
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=get_cert_path(verify))
    cert = getattr(session, "_cert_file", None)
    if cert:
        context.load_cert_chain(cert, getattr(session, "_key_file", None))
    return context


class SyncTransport:
    """A small pool of keep-alive sockets; safe to share between threads."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._idle: list[tuple[socket.socket, Any]] = []
        self._lock = threading.Lock()

    def _connect(self) -> tuple[socket.socket, Any]:
        ep = self.endpoint
        try:
            sock = socket.create_connection(ep.address, ep.connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ep.tls is not None:
                sock = ep.tls.wrap_socket(sock, server_hostname=ep.address[0])
        except TimeoutError as error:
            raise ConnectTimeoutError(endpoint_url=ep.url, error=error) from error
        except OSError as error:
            raise EndpointConnectionError(endpoint_url=ep.url, error=error) from error
        sock.settimeout(ep.read_timeout)
        return sock, sock.makefile("rb")

    def _checkout(self) -> tuple[socket.socket, Any]:
        with self._lock:
            while self._idle:
                sock, reader = self._idle.pop()
                if not wait_for_read(sock, timeout=0.0):  # readable when idle: closed
                    return sock, reader
                _close(sock, reader)
        return self._connect()

    def send(self, headers: dict[str, str], body: bytes) -> Response:
        sock, reader = self._checkout()
        ep = self.endpoint
        try:
            sock.sendall(request_bytes(ep.host, headers, body))
            head = _read_head(reader)
            content = _read_body(reader, head)
        except TimeoutError as error:
            _close(sock, reader)
            raise ReadTimeoutError(endpoint_url=ep.url, error=error) from error
        except (OSError, ProtocolError) as error:
            _close(sock, reader)
            raise ConnectionClosedError(endpoint_url=ep.url, error=error) from error
        except BaseException:
            _close(sock, reader)
            raise
        if head.keep_alive:
            with self._lock:
                if len(self._idle) < MAX_IDLE:
                    self._idle.append((sock, reader))
                    return head.status, head.headers, content
        _close(sock, reader)
        return head.status, head.headers, content

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock, reader in idle:
            _close(sock, reader)


def _close(sock: socket.socket, reader: Any) -> None:
    try:
        reader.close()
        sock.close()
    except OSError:
        pass


def _read_head(reader: Any) -> Head:
    lines = []
    while True:
        line = reader.readline(65537)
        if not line:
            raise ProtocolError("the connection closed before a response")
        if line in (b"\r\n", b"\n"):
            break
        lines.append(line)
    return parse_head(b"".join(lines))


def _read_body(reader: Any, head: Head) -> bytes:
    if head.chunked:
        parts = []
        while size := chunk_size(reader.readline(65537)):
            parts.append(_exactly(reader.read(size + 2), size + 2)[:-2])
        while reader.readline(65537) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)
    length = head.length
    if length is None:
        head.keep_alive = False
        return bytes(reader.read())
    return _exactly(reader.read(length), length)


def _exactly(data: bytes, wanted: int) -> bytes:
    if len(data) != wanted:
        raise ProtocolError(f"the connection closed after {len(data)} of {wanted} bytes")
    return data


class AsyncTransport:
    """Keep-alive asyncio streams; one event loop's."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        ep = self.endpoint
        host, port = ep.address
        try:
            async with asyncio.timeout(ep.connect_timeout):
                return await asyncio.open_connection(
                    host, port, ssl=ep.tls, server_hostname=host if ep.tls else None
                )
        except TimeoutError as error:
            raise ConnectTimeoutError(endpoint_url=ep.url, error=error) from error
        except OSError as error:
            raise EndpointConnectionError(endpoint_url=ep.url, error=error) from error

    async def send(self, headers: dict[str, str], body: bytes) -> Response:
        pair = None
        while self._idle:
            reader, writer = self._idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                pair = reader, writer
                break
            writer.close()
        reader, writer = pair or await self._connect()
        ep = self.endpoint
        try:
            writer.write(request_bytes(ep.host, headers, body))
            async with asyncio.timeout(ep.read_timeout):
                raw = await reader.readuntil(b"\r\n\r\n")
                head = parse_head(raw[:-4])
                content = await _read_body_async(reader, head)
        except TimeoutError as error:
            writer.close()
            raise ReadTimeoutError(endpoint_url=ep.url, error=error) from error
        except (OSError, ProtocolError, asyncio.IncompleteReadError) as error:
            writer.close()
            raise ConnectionClosedError(endpoint_url=ep.url, error=error) from error
        except BaseException:  # cancelled (the deadline): the response is still coming
            writer.close()
            raise
        if head.keep_alive and len(self._idle) < MAX_IDLE:
            self._idle.append((reader, writer))
        else:
            writer.close()
        return head.status, head.headers, content

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()


async def _read_body_async(reader: asyncio.StreamReader, head: Head) -> bytes:
    if head.chunked:
        parts = []
        while size := chunk_size(await reader.readline()):
            parts.append((await reader.readexactly(size + 2))[:-2])
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        return b"".join(parts)
    length = head.length
    if length is None:
        head.keep_alive = False
        return await reader.read()
    return await reader.readexactly(length)
