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
    lines = [f"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"]
    lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
    lines.append("\r\n")
    return "".join(lines).encode("latin-1") + body


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
    """Status line and headers (without the blank line that ends them)."""
    text = raw.decode("latin-1")
    status_line, _, rest = text.partition("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"not an HTTP response: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in rest.split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
    connection = headers.get("connection", "").lower()
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
