"""Keep-alive connections to one endpoint: what both transports share, and the sync one
(sockets; the async one is in `async_transport`).

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

import socket
import ssl
import struct
import sys
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

from zae_limiter.wire.http import Head, ProtocolError, body_of, request_bytes, split_head

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


def _kernel_timeouts(endpoint: Endpoint) -> bool:
    """Whether plain sockets may block with the read timeout kept by the kernel.

    A socket with a Python timeout polls before each send and receive (two system calls
    and their wrapping per operation); a blocking one with SO_RCVTIMEO / SO_SNDTIMEO does
    one, and fails with EAGAIN when the timeout passes. Linux only (other systems keep
    the portable way), plain TCP only (TLS reads must not see EAGAIN on a blocking
    socket), and not below a millisecond (a zero timeval means no timeout at all).
    """
    timeout = endpoint.read_timeout
    return (
        sys.platform == "linux" and endpoint.tls is None and (timeout is None or timeout >= 0.001)
    )


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1_000_000))


class SyncTransport:
    """A small pool of keep-alive sockets; safe to share between threads."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._kernel = _kernel_timeouts(endpoint)
        # Worked out once, not per connection (moto's server closes every one).
        self._family = ip_family(endpoint.address[0])
        timeout = endpoint.read_timeout
        self._timeval = None if timeout is None else _timeval(timeout)

    def _set_read_timeout(self, sock: socket.socket) -> None:
        if not self._kernel:
            sock.settimeout(self.endpoint.read_timeout)
            return
        sock.settimeout(None)
        timeval = self._timeval
        if timeval is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)

    def _idle_and_open(self, sock: socket.socket) -> bool:
        """Nothing to read: the peer has neither closed it nor sent anything unasked."""
        if not self._kernel:
            return not wait_for_read(sock, timeout=0.0)
        try:
            sock.recv(1, _PEEK_NOW)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False

    def _connect(self) -> socket.socket:
        ep = self.endpoint
        try:
            sock = _open_socket(ep.address, self._family, ep.connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ep.tls is not None:
                sock = ep.tls.wrap_socket(sock, server_hostname=ep.address[0])
        except TimeoutError as error:
            raise ConnectTimeoutError(endpoint_url=ep.url, error=error) from error
        except OSError as error:
            raise EndpointConnectionError(endpoint_url=ep.url, error=error) from error
        self._set_read_timeout(sock)
        return sock

    def _checkout(self) -> socket.socket:
        with self._lock:
            while self._idle:
                sock = self._idle.pop()
                if self._idle_and_open(sock):
                    return sock
                sock.close()
        return self._connect()

    def send(self, headers: dict[str, str], body: bytes) -> Response:
        sock = self._checkout()
        ep = self.endpoint
        try:
            sock.sendall(request_bytes(ep.host, headers, body))
            head, content = _receive(sock)
        except (TimeoutError, BlockingIOError) as error:  # EAGAIN: the kernel's timeout
            sock.close()
            raise ReadTimeoutError(endpoint_url=ep.url, error=error) from error
        except (OSError, ProtocolError) as error:
            sock.close()
            raise ConnectionClosedError(endpoint_url=ep.url, error=error) from error
        except BaseException:
            sock.close()
            raise
        if head.keep_alive:
            with self._lock:
                if len(self._idle) < MAX_IDLE:
                    self._idle.append(sock)
                    return head.status, head.headers, content
        sock.close()
        return head.status, head.headers, content

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()


#: Flags combined once: an IntFlag `|` runs three Python-level calls in enum.
_PEEK_NOW = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)


def _receive(sock: socket.socket) -> tuple[Head, bytes]:
    buffer = bytearray()
    while True:
        data = sock.recv(65536)
        buffer += data
        split = split_head(buffer, not data)
        if split is not None:
            break
    head, start = split
    while True:
        found = body_of(head, buffer, start, not data)
        if found is not None:
            content, used = found
            if used != len(buffer):  # bytes nobody asked for: do not reuse the connection
                head.keep_alive = False
            return head, content
        data = sock.recv(65536)
        buffer += data


def ip_family(host: str) -> socket.AddressFamily | None:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family
    return None


def _open_socket(
    address: tuple[str, int], family: int | None, timeout: float | None
) -> socket.socket:
    """A connected socket. A host name (`family` None) is resolved for every connection,
    as urllib3 does (DNS may move an endpoint); an IP address needs no lookup."""
    if family is None:
        return socket.create_connection(address, timeout)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock
