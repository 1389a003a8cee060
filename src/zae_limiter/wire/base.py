"""What the sync and the async lean client share: building and reading one call.

Both borrow from the regular client they stand in for: its endpoint, region, credentials
(the same object, so refreshing and every source of botocore's chain work), its HTTP
session (botocore's urllib3 pool / aiobotocore's aiohttp session: the same connections,
timeouts, proxies, TLS verification and CA bundle), its event system and its exception
classes. What they skip is the generic machinery: user-agent assembly, parameter
validation and model-driven serialization and parsing, the retry handler (the library
makes one attempt per call anyway) and the signer's generic canonicalisation.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import botocore
from botocore.awsrequest import AWSPreparedRequest
from botocore.client import BaseClient
from botocore.exceptions import ClientError, NoCredentialsError
from botocore.handlers import add_recursion_detection_header, inject_api_version_header_if_needed

from zae_limiter.wire import protocol
from zae_limiter.wire.protocol import Credentials, Signer, amz_date
from zae_limiter.wire.transport import Endpoint

SERVICE = "dynamodb"


def borrowable(client: Any) -> bool:
    """Whether `client` is a botocore / aiobotocore client exposing what the lean path
    borrows. Anything else (a wrapper a user passed as `client=`, to see or change calls)
    keeps every call, so the lean path stays off."""
    if not isinstance(client, BaseClient):
        return False
    endpoint = getattr(client, "_endpoint", None)
    signer = getattr(client, "_request_signer", None)
    return (
        getattr(endpoint, "http_session", None) is not None
        and signer is not None
        and hasattr(signer, "_credentials")
        and bool(getattr(client.meta, "endpoint_url", None))
        and bool(getattr(client.meta, "region_name", None))
    )


#: botocore's own `before-call` handlers: they only add a header when they apply (inside
#: Lambda; for endpoint-discovery operations) and never answer, so calling them directly
#: does what emitting the event does.
DIRECT_HANDLERS = frozenset({add_recursion_detection_header, inject_api_version_header_if_needed})


class Hooks:
    """Which events of a call need botocore's emitter.

    The emitter keeps, per event name, the handlers it looked up last time (its
    `_lookup_cache`, replaced whenever a handler is registered or unregistered). What is
    there decides: no handler, the event is skipped; only botocore's defaults, they are
    called directly; anything else, or nothing looked up yet, the event is emitted as
    the regular client emits it. So a handler a user registers at any time fires from
    the next call on.
    """

    def __init__(self, events: Any, names: Collection[str]) -> None:
        inner = getattr(events, "_emitter", events)
        alias = getattr(events, "_alias_event_name", lambda name: name)
        usable = isinstance(getattr(inner, "_lookup_cache", None), dict) and all(
            alias(name) == name for name in names
        )
        self._inner = inner if usable else None
        #: event name -> (the handler list last seen, the handlers to call directly or None)
        self._seen: dict[str, tuple[object, tuple[Any, ...] | None]] = {}

    def silent(self, name: str) -> bool:
        """No handler is registered for `name` (as of the emitter's last look-up)."""
        inner = self._inner
        found = None if inner is None else inner._lookup_cache.get(name)
        return found is not None and not found

    def direct(self, name: str) -> tuple[Any, ...] | None:
        """The handlers of `name` when they may be called directly, else None (emit)."""
        inner = self._inner
        found = None if inner is None else inner._lookup_cache.get(name)
        if found is None:
            return None
        seen = self._seen.get(name)
        if seen is not None and seen[0] is found:
            return seen[1]
        handlers = tuple(found)
        usable = handlers if all(h in DIRECT_HANDLERS for h in handlers) else None
        self._seen[name] = (found, usable)  # holding the list keeps the identity check valid
        return usable


class LeanBase:
    """The parts of a lean call that do no I/O; subclasses send and emit events."""

    #: The face's own keep-alive transport (None: sends through the client's session).
    transport: Any = None

    def __init__(self, client: Any) -> None:
        meta = client.meta
        self.regular = client
        self.url: str = meta.endpoint_url
        #: What botocore sends to: the endpoint with its path, `/`.
        self.target_url = self.url.rstrip("/") + "/"
        self.events = meta.events
        self.session = client._endpoint.http_session
        self.credentials = client._request_signer._credentials
        self.signer = Signer(self.url, meta.region_name, SERVICE)
        self.user_agent = f"zae-limiter-lean botocore/{botocore.__version__}"
        model = meta.service_model
        self.models = {op: model.operation_model(op) for op in protocol.OPERATIONS.values()}
        #: operation -> its `before-call`, `before-send` and `after-call` event names
        self.event_names = {
            op: tuple(
                f"{event}.{SERVICE}.{op}" for event in ("before-call", "before-send", "after-call")
            )
            for op in protocol.OPERATIONS.values()
        }
        self.hooks = Hooks(self.events, [n for names in self.event_names.values() for n in names])
        self._members: dict[str, Collection[str]] = {}
        self._service_model = model
        #: operation -> its request headers, copied for each call (handlers may add some)
        self.headers = {
            op: protocol.request_headers(op, self.user_agent)
            for op in protocol.OPERATIONS.values()
        }

    def endpoint(self, connect: float | None, read: float | None) -> Endpoint:
        return Endpoint.of(self.url, self.session, connect, read)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def members(self, code: str) -> Collection[str]:
        """Modelled members of an error code (cached; unknown codes have none)."""
        found = self._members.get(code)
        if found is None:
            shape = self._service_model.shape_for_error_code(code)
            found = tuple(shape.members) if shape is not None else ()
            self._members[code] = found
        return found

    def build(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """The request as `before-call` handlers see it."""
        # `protocol.encode`, inline: every call. The URL botocore shows handlers is the
        # endpoint joined with the path, `/`.
        return {
            "url_path": "/",
            "query_string": "",
            "method": "POST",
            "headers": self.headers[operation].copy(),
            "body": protocol.ENCODER.encode(params).encode(),
            "url": self.target_url,
            "context": {},
        }

    def sign(self, request: dict[str, Any], frozen: Any) -> dict[str, str]:
        """Sign the request with frozen credentials; its wire headers."""
        if frozen is None:
            raise NoCredentialsError()
        credentials = Credentials(frozen.access_key, frozen.secret_key, frozen.token)
        headers: dict[str, str] = request["headers"]
        self.signer.sign(headers, request["body"], credentials, amz_date(time.time()))
        return headers

    def prepared(self, headers: dict[str, str], body: bytes) -> AWSPreparedRequest:
        """The request as `before-send` handlers and the regular session take it."""
        wire_headers: Any = headers  # a plain dict: what the transports and handlers read
        return AWSPreparedRequest("POST", self.target_url, wire_headers, body, False)

    def read(self, status: int, headers: Any, body: bytes) -> dict[str, Any]:
        """Parse a response a session or a handler produced (any header mapping)."""
        return protocol.parse(status, protocol.lowered(headers), body, self.members)

    def read_own(self, status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """Parse a response of the lean transports (headers already lower-case)."""
        return protocol.parse(status, headers, body, self.members)

    def result(self, operation: str, status: int, parsed: dict[str, Any]) -> dict[str, Any]:
        """The parsed response, or the client's own exception class for its error code."""
        if status >= 300:
            code = str(parsed.get("Error", {}).get("Code", ""))
            error: ClientError = self.regular.exceptions.from_code(code)(parsed, operation)
            raise error
        return parsed


class LeanResponse:
    """What `after-call` handlers receive as `http_response` (botocore's AWSResponse
    attributes they read)."""

    __slots__ = ("content", "headers", "status_code", "url")

    def __init__(self, url: str, status: int, headers: dict[str, str], content: bytes) -> None:
        self.url = url
        self.status_code = status
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")
