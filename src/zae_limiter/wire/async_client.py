"""The lean client for aiobotocore: the hot operations over our own keep-alive
connections (or the client's aiohttp session when a proxy applies)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from zae_limiter.wire.async_transport import AsyncTransport
from zae_limiter.wire.base import LeanBase, LeanResponse


class AsyncLeanClient(LeanBase):
    """The async twin of `SyncLeanClient`, differing where it awaits, and in `deadline`."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        timeout = self.session._timeout  # aiohttp.ClientTimeout
        endpoint = self.endpoint(timeout.sock_connect, timeout.sock_read)
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
            _, answer = await self.events.emit_until_response(
                name, context=request["context"], **kwargs
            )
            return answer
        for handler in direct:  # botocore's defaults: plain functions that never answer
            handler(event_name=name, context=request["context"], **kwargs)
        return None

    async def exchange(
        self, operation: str, request: dict[str, Any], deadline: float | None
    ) -> tuple[int, Any, dict[str, Any]]:
        """Sign and send; the status, the HTTP response (None when no `after-call`
        handler needs one) and the parsed body. `deadline`: loop time, or None."""
        headers = self.sign(request, await self.credentials.get_frozen_credentials())
        _, before_send, after_call = self.event_names[operation]
        hooks = self.hooks
        if self.transport is not None and hooks.silent(before_send):
            status, got, content = await self.transport.send(headers, request["body"], deadline)
            parsed = self.read_own(status, got, content)
            if hooks.silent(after_call):
                return status, None, parsed
            return status, LeanResponse(self.url, status, got, content), parsed
        prepared = self.prepared(headers, request["body"])
        async with asyncio.timeout_at(deadline):  # handlers and the session: not our timer
            _, http = await self.events.emit_until_response(before_send, request=prepared)
            if http is None:
                http = await self.send(prepared)
            content = http.content
            if inspect.isawaitable(content):
                content = await content
        return http.status_code, http, self.read(http.status_code, http.headers, content)

    async def call(
        self, operation: str, params: dict[str, Any], deadline: float | None = None
    ) -> dict[str, Any]:
        """One call. `deadline`: seconds from now by which it must end, else the builtin
        `TimeoutError` (the connection it used is closed); the client's read timeout
        still raises botocore's `ReadTimeoutError`."""
        at = None if deadline is None else asyncio.get_running_loop().time() + deadline
        request = self.build(operation, params)
        answer = await self.before_call(operation, request)
        if answer is not None:  # a handler answered instead of DynamoDB
            http, parsed = answer
            status = http.status_code
        else:
            status, http, parsed = await self.exchange(operation, request, at)
            if http is None:  # `result` of an answer that is no error, without the call
                return parsed if status < 300 else self.result(operation, status, parsed)
        await self.events.emit(
            self.event_names[operation][2],
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
