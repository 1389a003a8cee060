"""The lean client for boto3: the hot operations over our own keep-alive sockets (or the
client's urllib3 session when a proxy applies)."""

from __future__ import annotations

from typing import Any

from zae_limiter.wire.base import SERVICE, LeanBase, LeanResponse
from zae_limiter.wire.transport import SyncTransport


class SyncLeanClient(LeanBase):
    """`update_item`, `put_item`, `get_item`, `batch_get_item` with boto3's results and
    errors; `before-call`, `before-send` and `after-call` handlers fire as on the client."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        timeout = self.session._timeout
        endpoint = self.endpoint(timeout.connect_timeout, timeout.read_timeout)
        self.transport = SyncTransport(endpoint) if endpoint.direct else None

    def send(self, prepared: Any) -> Any:
        if self.transport is None:
            return self.session.send(prepared)
        status, headers, content = self.transport.send(prepared.headers, prepared.body)
        return LeanResponse(self.url, status, headers, content)

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        request = self.build(operation, params)
        model = self.models[operation]
        events = self.events
        _, answer = events.emit_until_response(
            f"before-call.{SERVICE}.{operation}",
            model=model,
            params=request,
            request_signer=None,
            context=request["context"],
        )
        if answer is not None:  # a handler answered instead of DynamoDB
            http, parsed = answer
        else:
            prepared = self.prepare(request, self.credentials.get_frozen_credentials())
            _, http = events.emit_until_response(
                f"before-send.{SERVICE}.{operation}", request=prepared
            )
            if http is None:
                http = self.send(prepared)
            parsed = self.read(http.status_code, http.headers, http.content)
        events.emit(
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

    def update_item(self, **params: Any) -> dict[str, Any]:
        return self.call("UpdateItem", params)

    def put_item(self, **params: Any) -> dict[str, Any]:
        return self.call("PutItem", params)

    def get_item(self, **params: Any) -> dict[str, Any]:
        return self.call("GetItem", params)

    def batch_get_item(self, **params: Any) -> dict[str, Any]:
        return self.call("BatchGetItem", params)
