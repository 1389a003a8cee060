"""DynamoDB's JSON protocol for the hot operations, as pure functions (no I/O, no boto).

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
import http.client
import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

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
_ENCODER = json.JSONEncoder(separators=_COMPACT, default=_bytes_as_base64)
_DECODER = json.JSONDecoder()


def encode(params: Mapping[str, Any]) -> bytes:
    """The request body. Bytes can only be binary attribute values, sent as base64."""
    return _ENCODER.encode(params).encode()


def request_headers(operation: str, user_agent: str) -> dict[str, str]:
    return {
        "X-Amz-Target": TARGETS[operation],
        "Content-Type": CONTENT_TYPE,
        "User-Agent": user_agent,
    }


def request_dict(url: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The shape botocore hands to `before-call` handlers (they may add headers)."""
    return {
        "url_path": "/",
        "query_string": "",
        "method": "POST",
        "headers": headers,
        "body": body,
        "url": url,
        "context": {},
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
        parsed = _DECODER.decode(body.decode())
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
