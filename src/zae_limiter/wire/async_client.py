"""The lean client for aiobotocore: the hot operations over our own keep-alive asyncio
streams (or the client's aiohttp session when a proxy applies)."""

from __future__ import annotations

import inspect
from typing import Any

from zae_limiter.wire.base import SERVICE, LeanBase, LeanResponse
from zae_limiter.wire.transport import AsyncTransport


class AsyncLeanClient(LeanBase):
    """The async twin of `SyncLeanClient`, differing only where it awaits."""

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

    async def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        request = self.build(operation, params)
        model = self.models[operation]
        events = self.events
        _, answer = await events.emit_until_response(
            f"before-call.{SERVICE}.{operation}",
            model=model,
            params=request,
            request_signer=None,
            context=request["context"],
        )
        if answer is not None:
            http, parsed = answer
        else:
            frozen = await self.credentials.get_frozen_credentials()
            prepared = self.prepare(request, frozen)
            _, http = await events.emit_until_response(
                f"before-send.{SERVICE}.{operation}", request=prepared
            )
            if http is None:
                http = await self.send(prepared)
            content = http.content
            if inspect.isawaitable(content):
                content = await content
            parsed = self.read(http.status_code, http.headers, content)
        await events.emit(
            f"after-call.{SERVICE}.{operation}",
            http_response=http,
            parsed=parsed,
            model=model,
            context=request["context"],
        )
        return self.result(operation, http.status_code, parsed)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def update_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("UpdateItem", params)

    async def put_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("PutItem", params)

    async def get_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("GetItem", params)

    async def batch_get_item(self, **params: Any) -> dict[str, Any]:
        return await self.call("BatchGetItem", params)
