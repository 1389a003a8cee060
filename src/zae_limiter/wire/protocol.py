"""DynamoDB's JSON protocol for the hot operations and its SigV4 signature, as pure
functions (no I/O, no boto): what one lean request is built, signed and read with.

A request is a JSON body and two headers (`X-Amz-Target`, `Content-Type`); a response is
the JSON body itself. What botocore adds on top, and the lean path must add too so that
callers see no difference:
- `ResponseMetadata` (request id, status, lower-cased headers, retry attempts);
- binary attribute values (`B`, `BS`) as bytes, base64 on the wire;
- error responses read the way botocore's JSON parser reads them (`__type` after the last
  `#`, `message` or `Message`, the status code when the body says nothing), plus the
  error's modelled members (a failed condition's `Item`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import json.encoder
import json.scanner
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

API_VERSION = "DynamoDB_20120810"
CONTENT_TYPE = "application/x-amz-json-1.0"

#: The operations the lean path carries: client method name -> wire operation name.
OPERATIONS: Mapping[str, str] = {
    "update_item": "UpdateItem",
    "put_item": "PutItem",
    "get_item": "GetItem",
    "batch_get_item": "BatchGetItem",
}
TARGETS: Mapping[str, str] = {op: f"{API_VERSION}.{op}" for op in OPERATIONS.values()}

_COMPACT = (",", ":")
Members = Callable[[str], Collection[str]]


def _bytes_as_base64(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not a DynamoDB JSON value")


#: One encoder for every body: `json.dumps` with options builds a new one per call, which
#: costs as much as encoding a hot request. Stateless between calls, so shared by threads.
ENCODER = json.JSONEncoder(separators=_COMPACT, default=_bytes_as_base64)
_DECODER = json.JSONDecoder()

# The C encoder and scanner `json` builds on, made once: `JSONEncoder.encode` makes a new
# C encoder for every call (two Python calls around it), and `JSONDecoder.decode` runs two
# Python calls and a whitespace regex around the scanner. Same output; no circular check
# (a request is a tree of plain values). Pythons without the C accelerator keep `json`'s.
_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_scanner: Any = getattr(json.scanner, "c_make_scanner", None)
_ENCODE: Callable[[Any, int], Any] | None = (
    None
    if _c_encoder is None
    else _c_encoder(
        None, _bytes_as_base64, json.encoder.encode_basestring_ascii, None, ":", ",",
        False, False, True,
    )
)  # fmt: skip
_SCAN: Callable[[str, int], tuple[Any, int]] | None = (
    None if _c_scanner is None else _c_scanner(_DECODER)
)


def encode(params: Mapping[str, Any]) -> bytes:
    """The request body. Bytes can only be binary attribute values, sent as base64."""
    if _ENCODE is None:
        return ENCODER.encode(params).encode()
    return "".join(_ENCODE(params, 0)).encode()


def _decode(text: str) -> Any:
    """`json.loads(text)`, through the C scanner when the text is one bare document."""
    if _SCAN is not None and text[:1] == "{":
        try:
            found, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            found, end = None, -1
        if end == len(text):
            return found
    return _DECODER.decode(text)  # whitespace around it, or an error to raise


def request_headers(operation: str, user_agent: str) -> dict[str, str]:
    return {
        "X-Amz-Target": TARGETS[operation],
        "Content-Type": CONTENT_TYPE,
        "User-Agent": user_agent,
    }


def _decode_binary(node: Any) -> None:
    """Turn base64 `B` / `BS` attribute values into bytes, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "B" and isinstance(value, str):
                node[key] = base64.b64decode(value)
            elif key == "BS" and isinstance(value, list) and all(isinstance(v, str) for v in value):
                node[key] = [base64.b64decode(v) for v in value]
            else:
                _decode_binary(value)
    elif isinstance(node, list):
        for value in node:
            _decode_binary(value)


def lowered(headers: Mapping[str, str]) -> dict[str, str]:
    """Response headers as `ResponseMetadata` shows them: a dict with lower-case names
    (what a session or a handler returned; the lean transports give them so already)."""
    out = {}
    for k, v in headers.items():  # a loop: a comprehension is a call of its own
        out[k.lower()] = v
    return out


def _metadata(status: int, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "RequestId": headers.get("x-amzn-requestid", ""),
        "HTTPStatusCode": status,
        "HTTPHeaders": headers,
        "RetryAttempts": 0,
    }


def _json(body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    try:
        parsed = _decode(body.decode())
    except ValueError:  # not UTF-8 (UnicodeDecodeError) or not JSON
        return {"message": body.decode("utf-8", "replace")}
    if b'"B":' in body or b'"BS":' in body:  # only binary values need a walk
        _decode_binary(parsed)
    return parsed if isinstance(parsed, dict) else {}


def error_code(body: Mapping[str, Any], status: int) -> str:
    code = str(body.get("__type") or status)
    code = code.split(":", 1)[0]
    return code.rsplit("#", 1)[-1]


def parse(status: int, headers: dict[str, str], body: bytes, members: Members) -> dict[str, Any]:
    """The response as botocore's client returns it (an error response when status >= 300).

    `headers`: lower-case names (see `lowered`).

    `members(code)` names the modelled members of an error code; those found in the body
    are copied next to `Error`, as botocore does (`Item` of a failed condition).
    """
    if status < 300:
        parsed = _json(body)
        parsed["ResponseMetadata"] = {  # _metadata, inline: every answer
            "RequestId": headers.get("x-amzn-requestid", ""),
            "HTTPStatusCode": status,
            "HTTPHeaders": headers,
            "RetryAttempts": 0,
        }
        return parsed
    stripped = body.strip()
    if status >= 500 and (not stripped or stripped.startswith(b"<html>")):
        return {
            "Error": {"Code": str(status), "Message": http.client.responses.get(status, "")},
            "ResponseMetadata": _metadata(status, headers),
        }
    document = _json(body)
    code = error_code(document, status)
    message = document.get("message", document.get("Message", ""))
    parsed = {"Error": {"Message": message, "Code": code}, "ResponseMetadata": {}}
    parsed["ResponseMetadata"] = _metadata(status, headers)
    for name in members(code):
        if name in document:
            parsed[name] = document[name]
    return parsed


# ---------------------------------------------------------------- signing
# AWS Signature Version 4 for one POST to `/` with a JSON body: the part of botocore's
# `SigV4Auth` the lean path needs, byte for byte the same signature
# (tests/unit/test_wire_signing.py signs the same request with both). Cheaper than
# botocore's: the canonical URI and query are constant, the headers are a small known
# set, and the signing key is derived once per day, not per request.

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
