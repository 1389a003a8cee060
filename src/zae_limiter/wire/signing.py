"""AWS Signature Version 4 for one POST to `/` with a JSON body: the part of botocore's
`SigV4Auth` the lean path needs, byte for byte the same signature
(tests/unit/test_wire_signing.py signs the same request with both).

What makes it cheaper than botocore's: the canonical URI and query are constant, the
headers are a small known set, and the signing key is derived once per day, not per
request.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import NamedTuple
from urllib.parse import urlsplit

from zae_limiter.wire.protocol import CONTENT_TYPE, TARGETS

ALGORITHM = "AWS4-HMAC-SHA256"
#: Headers botocore leaves out of the signature (`botocore.auth.SIGNED_HEADERS_BLACKLIST`).
UNSIGNED = frozenset(
    {
        "baggage", "connection", "expect", "keep-alive", "proxy-authenticate",
        "proxy-authorization", "te", "traceparent", "tracestate", "trailer",
        "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id",
    }
)  # fmt: skip
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Credentials(NamedTuple):
    """What one signature needs (botocore's frozen credentials fit this shape)."""

    access_key: str
    secret_key: str
    token: str | None


def host_of(url: str) -> str:
    """The signed `host` value: lower case, the port only when not the scheme's default."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


#: The last formatted second: a request time changes once a second, not per call.
_last_date: tuple[int, str] = (-1, "")


def amz_date(epoch_seconds: float) -> str:
    global _last_date
    second = int(epoch_seconds)
    cached = _last_date
    if cached[0] == second:
        return cached[1]
    text = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
    _last_date = (second, text)  # one tuple, swapped whole: safe between threads
    return text


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.digest(key, message.encode(), "sha256")


def _normal(value: str) -> str:
    """A header value as SigV4 signs it: runs of whitespace as one space, no ends."""
    return " ".join(value.split())


#: Header values the lean clients send, normal already (SigV4's whitespace rule).
_NORMAL: dict[str, str] = {
    value: value for value in (CONTENT_TYPE, *TARGETS.values()) if value == _normal(value)
}
#: The header names the lean clients send (`protocol.request_headers` plus the date),
#: without and with a session token; any other set, e.g. a header a `before-call` handler
#: added, takes the general canonicalisation.
_PLAIN = frozenset({"X-Amz-Target", "Content-Type", "User-Agent", "X-Amz-Date"})
_WITH_TOKEN = _PLAIN | {"X-Amz-Security-Token"}
_PLAIN_SIGNED = "content-type;host;x-amz-date;x-amz-target"
_TOKEN_SIGNED = "content-type;host;x-amz-date;x-amz-security-token;x-amz-target"


class Signer:
    """Signs requests to one endpoint, region and service."""

    def __init__(self, url: str, region: str, service: str = "dynamodb") -> None:
        self.host = host_of(url)
        self.region = region
        self.service = service
        # (secret, day, signing key, credential scope): the key is derived once a day.
        self._key: tuple[str, str, bytes, str] = ("", "", b"", "")

    def _signing_key(self, secret: str, day: str) -> tuple[bytes, str]:
        cached = self._key
        if cached[1] == day and cached[0] == secret:
            return cached[2], cached[3]
        key = _hmac(("AWS4" + secret).encode(), day)
        for part in (self.region, self.service, "aws4_request"):
            key = _hmac(key, part)
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        self._key = (secret, day, key, scope)
        return key, scope

    def _canonical_headers(self, headers: dict[str, str]) -> tuple[str, str]:
        """The canonical header block and the signed names, for any header set."""
        signed: dict[str, str] = {"host": self.host}
        for name, value in headers.items():
            lower = name.lower()
            if lower not in UNSIGNED:
                signed[lower] = _normal(value)
        names = sorted(signed)
        return "".join(f"{n}:{signed[n]}\n" for n in names), ";".join(names)

    def sign(
        self, headers: dict[str, str], body: bytes, credentials: Credentials, when: str
    ) -> None:
        """Add `X-Amz-Date`, `X-Amz-Security-Token` (if any) and `Authorization`, in place.

        `when` is the request time as `amz_date()` formats it.
        """
        headers["X-Amz-Date"] = when
        token = credentials.token
        if token:
            headers["X-Amz-Security-Token"] = token
        if headers.keys() == (_WITH_TOKEN if token else _PLAIN):
            # The usual set, already in sorted order: no per-header loop or sort. The
            # values the lean clients set are normal already (`_NORMAL`): no call.
            security = f"x-amz-security-token:{_normal(token)}\n" if token else ""
            kind, target = headers["Content-Type"], headers["X-Amz-Target"]
            block = (
                f"content-type:{_NORMAL.get(kind) or _normal(kind)}\nhost:{self.host}\n"
                f"x-amz-date:{when}\n{security}"
                f"x-amz-target:{_NORMAL.get(target) or _normal(target)}\n"
            )
            signed_names = _TOKEN_SIGNED if token else _PLAIN_SIGNED
        else:
            block, signed_names = self._canonical_headers(headers)
        canonical = f"POST\n/\n\n{block}\n{signed_names}\n{hashlib.sha256(body).hexdigest()}"
        secret, day, cached = credentials.secret_key, when[:8], self._key
        if cached[1] == day and cached[0] == secret:
            key, scope = cached[2], cached[3]  # the day's key, derived already
        else:
            key, scope = self._signing_key(secret, day)
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        # One-shot HMAC: a single call into OpenSSL, where a keyed copy takes several
        # Python-level steps (hmac.HMAC.copy, update, hexdigest).
        string_to_sign = f"{ALGORITHM}\n{when}\n{scope}\n{digest}".encode()
        signature = hmac.digest(key, string_to_sign, "sha256").hex()
        headers["Authorization"] = (
            f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed_names}, Signature={signature}"
        )
