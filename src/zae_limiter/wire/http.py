"""HTTP/1.1 for one kind of exchange, as pure functions: a POST with a known body, and a
response with a status line, headers and a body of known length (or chunked).

http.client and urllib3 spend most of a hot call's CPU on generality (header objects
built with the email parser, per-request pool lookups and retry objects); this does the
few string operations the exchange needs. Transports (sync sockets, asyncio streams) feed
bytes in and take requests out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class ProtocolError(Exception):
    """The peer answered with something that is not an HTTP/1.x response."""


def request_bytes(host: str, headers: Mapping[str, str], body: bytes) -> bytes:
    """The whole request (`POST /`), ready for one send."""
    # `map(": ".join, ...)` joins each name and value in C: no per-header bytecode.
    fields = "\r\n".join(map(": ".join, headers.items()))
    text = f"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
    if fields:
        text = f"{text}{fields}\r\n"
    return f"{text}\r\n".encode("latin-1") + body


@dataclass(slots=True)
class Head:
    status: int
    headers: dict[str, str]  # lower-case names
    keep_alive: bool

    @property
    def length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None else None

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()


def parse_head(raw: bytes) -> Head:
    """Status line and headers (without the blank line that ends them).

    One pass over the lines, each name lowered once: this runs on every call, between two
    blocking socket waits, where each bytecode costs several times its hot-loop price. A
    name is not stripped: RFC 9112 forbids whitespace before the colon.
    """
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key = name.lower()
            if key in headers:
                headers[key] = f"{headers[key]}, {value.strip()}"
            else:
                headers[key] = value.strip()
    connection = headers.get("connection")
    if connection is None:
        keep_alive = parts[0] != "HTTP/1.0"
    else:
        connection = connection.lower()
        keep_alive = "close" not in connection and (
            parts[0] != "HTTP/1.0" or "keep-alive" in connection
        )
    return Head(int(parts[1]), headers, keep_alive)


def chunk_size(line: bytes) -> int:
    """The size announced by one chunk-size line (extensions ignored)."""
    try:
        return int(line.split(b";", 1)[0].strip(), 16)
    except ValueError as bad:
        raise ProtocolError(f"bad chunk size line {line[:40]!r}") from bad


def _chunked_body(buffer: bytes | bytearray, start: int) -> tuple[bytes, int] | None:
    """The body of a chunked message and where it ends, or None while incomplete."""
    parts = []
    at = start
    while True:
        eol = buffer.find(b"\r\n", at)
        if eol < 0:
            return None
        size = chunk_size(bytes(buffer[at:eol]))
        at = eol + 2
        if size == 0:
            break
        if len(buffer) < at + size + 2:
            return None
        parts.append(bytes(buffer[at : at + size]))
        at += size + 2
    while True:  # trailers, up to an empty line
        eol = buffer.find(b"\r\n", at)
        if eol < 0:
            return None
        if eol == at:
            return b"".join(parts), eol + 2
        at = eol + 2


def split_head(buffer: bytes | bytearray, eof: bool) -> tuple[Head, int] | None:
    """The head at the start of `buffer` and where its body starts; None while more bytes
    are needed. Parsed once per response: a body often arrives after its head."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if eof:
            raise ProtocolError("the connection closed before a complete response")
        return None
    return parse_head(bytes(buffer[:end])), end + 4


def body_of(
    head: Head, buffer: bytes | bytearray, start: int, eof: bool
) -> tuple[bytes, int] | None:
    """The body that starts at `start` and the offset where the response ends; None while
    more bytes are needed."""
    headers = head.headers
    coding = headers.get("transfer-encoding")
    if coding is not None and "chunked" in coding.lower():
        found = _chunked_body(buffer, start)
        if found is None and eof:
            raise ProtocolError("the connection closed inside a chunked body")
        return found
    value = headers.get("content-length")
    if value is None:  # read to the end of the connection
        if not eof:
            return None
        head.keep_alive = False
        return bytes(buffer[start:]), len(buffer)
    end = start + int(value)
    if len(buffer) < end:
        if eof:
            raise ProtocolError(
                f"the connection closed after {len(buffer) - start} of {value} body bytes"
            )
        return None
    return bytes(buffer[start:end]), end
