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


def amz_date(epoch_seconds: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(epoch_seconds))


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


class Signer:
    """Signs requests to one endpoint, region and service."""

    def __init__(self, url: str, region: str, service: str = "dynamodb") -> None:
        self.host = host_of(url)
        self.region = region
        self.service = service
        self._key: tuple[str, str, bytes] | None = None  # (secret, day, signing key)

    def _signing_key(self, secret: str, day: str) -> bytes:
        cached = self._key
        if cached is not None and cached[0] == secret and cached[1] == day:
            return cached[2]
        key = _hmac(("AWS4" + secret).encode(), day)
        for part in (self.region, self.service, "aws4_request"):
            key = _hmac(key, part)
        self._key = (secret, day, key)
        return key

    def sign(
        self, headers: dict[str, str], body: bytes, credentials: Credentials, when: str
    ) -> None:
        """Add `X-Amz-Date`, `X-Amz-Security-Token` (if any) and `Authorization`, in place.

        `when` is the request time as `amz_date()` formats it.
        """
        headers["X-Amz-Date"] = when
        if credentials.token:
            headers["X-Amz-Security-Token"] = credentials.token
        signed: dict[str, str] = {"host": self.host}
        for name, value in headers.items():
            lower = name.lower()
            if lower not in UNSIGNED:
                signed[lower] = " ".join(value.split())
        names = sorted(signed)
        signed_names = ";".join(names)
        canonical = "\n".join(
            (
                "POST",
                "/",
                "",
                "".join(f"{n}:{signed[n]}\n" for n in names),
                signed_names,
                hashlib.sha256(body).hexdigest(),
            )
        )
        day = when[:8]
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(
            (ALGORITHM, when, scope, hashlib.sha256(canonical.encode()).hexdigest())
        )
        key = self._signing_key(credentials.secret_key, day)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (
            f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed_names}, Signature={signature}"
        )
