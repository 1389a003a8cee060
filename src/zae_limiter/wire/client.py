"""The lean clients, sync and async, and what they share: building and reading one call.

Both borrow from the regular client they stand in for: its endpoint, region, credentials
(the same object, so refreshing and every source of botocore's chain work), its HTTP
session (botocore's urllib3 pool / aiobotocore's aiohttp session: the same connections,
timeouts, proxies, TLS verification and CA bundle), its event system and its exception
classes. What they skip is the generic machinery: user-agent assembly, parameter
validation and model-driven serialization and parsing, the retry handler (the library
makes one attempt per call anyway) and the signer's generic canonicalisation.

`AsyncLeanClient` (aiobotocore: our asyncio connections, or the client's aiohttp session
when a proxy applies) is written once; `SyncLeanClient` (boto3: our keep-alive sockets, or
the client's urllib3 session) is generated from it by tools/unasync. Where they differ
beyond `await` (the async call's `deadline`, the hand-off to a handler or the session)
lives in the small hand-written bases `_AsyncLean` and `_SyncLean`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Collection
from typing import Any

import botocore
from botocore.awsrequest import AWSPreparedRequest
from botocore.client import BaseClient
from botocore.exceptions import ClientError, NoCredentialsError
from botocore.handlers import add_recursion_detection_header, inject_api_version_header_if_needed
from botocore.retries.standard import RetryQuotaChecker

from zae_limiter.wire import protocol
from zae_limiter.wire.async_transport import AsyncTransport
from zae_limiter.wire.protocol import Signer, amz_date
from zae_limiter.wire.transport import Endpoint, SyncTransport

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


#: botocore's own handlers of the lean calls' events: the two `before-call` ones only add a
#: header when they apply (inside Lambda; for endpoint-discovery operations), the
#: `after-call` one gives retry quota back after a success; none answers and none is a
#: coroutine, so calling them directly does what emitting the event does. Methods are
#: matched by their function (a bound method is a new object each time it is read).
_BEFORE_CALL = (add_recursion_detection_header, inject_api_version_header_if_needed)
DIRECT_HANDLERS = frozenset({*_BEFORE_CALL, RetryQuotaChecker.release_retry_quota})


def session_timeouts(session: Any) -> tuple[float | None, float | None]:
    """The connect and read timeouts of the regular client's HTTP session."""
    timeout = session._timeout
    if hasattr(timeout, "sock_read"):  # aiobotocore: an aiohttp.ClientTimeout
        return timeout.sock_connect, timeout.sock_read
    return timeout.connect_timeout, timeout.read_timeout  # botocore: urllib3's Timeout


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
        plain = all(getattr(h, "__func__", h) in DIRECT_HANDLERS for h in handlers)
        usable = handlers if plain else None
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
            op: protocol.request_headers(op, self.user_agent) for op in protocol.OPERATIONS.values()
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
            "body": protocol.encode(params),
            "url": self.target_url,
            "context": {},
        }

    def sign(self, request: dict[str, Any], frozen: Any) -> dict[str, str]:
        """Sign the request with frozen credentials; its wire headers."""
        if frozen is None:
            raise NoCredentialsError()
        headers: dict[str, str] = request["headers"]
        # botocore's frozen credentials are a named tuple of the fields `Credentials` has.
        self.signer.sign(headers, request["body"], frozen, amz_date(time.time()))
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


class _AsyncLean(LeanBase):
    """What only the async face has: the deadline, kept on the transport's timer or, for a
    handler or the session, by asyncio (not our timer); an aiohttp body to await."""

    @staticmethod
    def _at(seconds: float | None) -> float | None:
        return None if seconds is None else asyncio.get_running_loop().time() + seconds

    async def _handed(
        self, before_send: str, prepared: AWSPreparedRequest, deadline: float | None
    ) -> tuple[Any, bytes]:
        """A `before-send` handler's response, else the session's; and its body."""
        async with asyncio.timeout_at(deadline):
            _, http = await self.events.emit_until_response(before_send, request=prepared)
            if http is None:
                http = await self.send(prepared)
            content = http.content
            if inspect.isawaitable(content):
                content = await content
        return http, content

    async def send(self, prepared: Any) -> Any:
        raise NotImplementedError


class _SyncLean(LeanBase):
    """What only the sync face has: a blocking hand-off to a handler or the session."""

    def _handed(self, before_send: str, prepared: AWSPreparedRequest) -> tuple[Any, bytes]:
        """A `before-send` handler's response, else the session's; and its body."""
        _, http = self.events.emit_until_response(before_send, request=prepared)
        if http is None:
            http = self.send(prepared)
        return http, http.content

    def send(self, prepared: Any) -> Any:
        raise NotImplementedError


# unasync: source
class AsyncLeanClient(_AsyncLean):
    """`update_item`, `put_item`, `get_item`, `batch_get_item` with aiobotocore's results
    and errors; `before-call`, `before-send` and `after-call` handlers fire as on the
    client."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        endpoint = self.endpoint(*session_timeouts(self.session))
        self.transport = AsyncTransport(endpoint) if endpoint.direct else None

    async def send(self, prepared: Any) -> Any:
        if self.transport is None:
            return await self.session.send(prepared)
        status, headers, content = await self.transport.send(prepared.headers, prepared.body)
        return LeanResponse(self.url, status, headers, content)

    async def before_call(self, operation: str, request: dict[str, Any]) -> Any:
        """Run `before-call`; a handler's answer `(http, parsed)`, or None."""
        name = self.event_names[operation][0]
        kwargs = {"model": self.models[operation], "params": request, "request_signer": None}
        direct = self.hooks.direct(name)
        if direct is None:
            context = request["context"]
            _, answer = await self.events.emit_until_response(name, context=context, **kwargs)
            return answer
        for handler in direct:  # botocore's defaults: plain functions that never answer
            handler(event_name=name, context=request["context"], **kwargs)
        return None

    async def exchange(
        self,
        operation: str,
        request: dict[str, Any],
        deadline: float | None,  # unasync: async only
    ) -> tuple[int, Any, dict[str, Any]]:
        """Sign and send; the status, the HTTP response (None when no `after-call`
        handler needs one) and the parsed body."""
        headers = self.sign(request, await self.credentials.get_frozen_credentials())
        _, before_send, after_call = self.event_names[operation]
        hooks = self.hooks
        if self.transport is not None and hooks.silent(before_send):
            status, got, content = await self.transport.send(
                headers,
                request["body"],
                deadline,  # unasync: async only
            )
            parsed = self.read_own(status, got, content)
            if hooks.silent(after_call):
                return status, None, parsed
            return status, LeanResponse(self.url, status, got, content), parsed
        http, content = await self._handed(
            before_send,
            self.prepared(headers, request["body"]),
            deadline,  # unasync: async only
        )
        return http.status_code, http, self.read(http.status_code, http.headers, content)

    async def call(
        self,
        operation: str,
        params: dict[str, Any],
        deadline: float | None = None,  # unasync: async only
    ) -> dict[str, Any]:
        """One call. The async face's `deadline`: seconds from now by which it must end,
        else the builtin `TimeoutError` (the connection it used is closed); the client's
        read timeout still raises botocore's `ReadTimeoutError`."""
        at = self._at(deadline)  # unasync: async only
        request = self.build(operation, params)
        answer = await self.before_call(operation, request)
        if answer is not None:  # a handler answered instead of DynamoDB
            http, parsed = answer
            status = http.status_code
        else:
            status, http, parsed = await self.exchange(
                operation,
                request,
                at,  # unasync: async only
            )
            if http is None:  # `result` of an answer that is no error, without the call
                return parsed if status < 300 else self.result(operation, status, parsed)
        after_call = self.event_names[operation][2]
        direct = self.hooks.direct(after_call)
        if direct is not None:  # botocore's retry quota: a plain method, called directly
            context = request["context"]
            for handler in direct:
                handler(
                    event_name=after_call,
                    http_response=http,
                    parsed=parsed,
                    model=self.models[operation],
                    context=context,
                )
        else:
            await self.events.emit(
                after_call,
                http_response=http,
                parsed=parsed,
                model=self.models[operation],
                context=request["context"],
            )
        return parsed if status < 300 else self.result(operation, status, parsed)

    async def update_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("UpdateItem", params)

    async def put_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("PutItem", params)

    async def get_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("GetItem", params)

    async def batch_get_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("BatchGetItem", params)


# unasync: generated from the source above by tools/unasync.py; do not edit
class SyncLeanClient(_SyncLean):
    """`update_item`, `put_item`, `get_item`, `batch_get_item` with boto3's results
    and errors; `before-call`, `before-send` and `after-call` handlers fire as on the
    client."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        endpoint = self.endpoint(*session_timeouts(self.session))
        self.transport = SyncTransport(endpoint) if endpoint.direct else None

    def send(self, prepared: Any) -> Any:
        if self.transport is None:
            return self.session.send(prepared)
        status, headers, content = self.transport.send(prepared.headers, prepared.body)
        return LeanResponse(self.url, status, headers, content)

    def before_call(self, operation: str, request: dict[str, Any]) -> Any:
        """Run `before-call`; a handler's answer `(http, parsed)`, or None."""
        name = self.event_names[operation][0]
        kwargs = {"model": self.models[operation], "params": request, "request_signer": None}
        direct = self.hooks.direct(name)
        if direct is None:
            context = request["context"]
            _, answer = self.events.emit_until_response(name, context=context, **kwargs)
            return answer
        for handler in direct:  # botocore's defaults: plain functions that never answer
            handler(event_name=name, context=request["context"], **kwargs)
        return None

    def exchange(
        self,
        operation: str,
        request: dict[str, Any],
    ) -> tuple[int, Any, dict[str, Any]]:
        """Sign and send; the status, the HTTP response (None when no `after-call`
        handler needs one) and the parsed body."""
        headers = self.sign(request, self.credentials.get_frozen_credentials())
        _, before_send, after_call = self.event_names[operation]
        hooks = self.hooks
        if self.transport is not None and hooks.silent(before_send):
            status, got, content = self.transport.send(
                headers,
                request["body"],
            )
            parsed = self.read_own(status, got, content)
            if hooks.silent(after_call):
                return status, None, parsed
            return status, LeanResponse(self.url, status, got, content), parsed
        http, content = self._handed(
            before_send,
            self.prepared(headers, request["body"]),
        )
        return http.status_code, http, self.read(http.status_code, http.headers, content)

    def call(
        self,
        operation: str,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        """One call. The async face's `deadline`: seconds from now by which it must end,
        else the builtin `TimeoutError` (the connection it used is closed); the client's
        read timeout still raises botocore's `ReadTimeoutError`."""
        request = self.build(operation, params)
        answer = self.before_call(operation, request)
        if answer is not None:  # a handler answered instead of DynamoDB
            http, parsed = answer
            status = http.status_code
        else:
            status, http, parsed = self.exchange(
                operation,
                request,
            )
            if http is None:  # `result` of an answer that is no error, without the call
                return parsed if status < 300 else self.result(operation, status, parsed)
        after_call = self.event_names[operation][2]
        direct = self.hooks.direct(after_call)
        if direct is not None:  # botocore's retry quota: a plain method, called directly
            context = request["context"]
            for handler in direct:
                handler(
                    event_name=after_call,
                    http_response=http,
                    parsed=parsed,
                    model=self.models[operation],
                    context=context,
                )
        else:
            self.events.emit(
                after_call,
                http_response=http,
                parsed=parsed,
                model=self.models[operation],
                context=request["context"],
            )
        return parsed if status < 300 else self.result(operation, status, parsed)

    def update_item(self, **params: Any) -> dict[str, Any]:
        return self.call("UpdateItem", params)

    def put_item(self, **params: Any) -> dict[str, Any]:
        return self.call("PutItem", params)

    def get_item(self, **params: Any) -> dict[str, Any]:
        return self.call("GetItem", params)

    def batch_get_item(self, **params: Any) -> dict[str, Any]:
        return self.call("BatchGetItem", params)


# unasync: end
