"""The lean client for boto3: the hot operations over our own keep-alive sockets (or the
client's urllib3 session when a proxy applies)."""

from __future__ import annotations

from typing import Any

from zae_limiter.wire.base import LeanBase, LeanResponse
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

    def before_call(self, operation: str, request: dict[str, Any]) -> Any:
        """Run `before-call`; a handler's answer `(http, parsed)`, or None."""
        name = self.event_names[operation][0]
        kwargs = {"model": self.models[operation], "params": request, "request_signer": None}
        direct = self.hooks.direct(name)
        if direct is None:
            return self.events.emit_until_response(name, context=request["context"], **kwargs)[1]
        for handler in direct:  # botocore's defaults: they never answer
            handler(event_name=name, context=request["context"], **kwargs)
        return None

    def exchange(self, operation: str, request: dict[str, Any]) -> tuple[int, Any, dict[str, Any]]:
        """Sign and send; the status, the HTTP response (None when no `after-call`
        handler needs one) and the parsed body."""
        headers = self.sign(request, self.credentials.get_frozen_credentials())
        _, before_send, after_call = self.event_names[operation]
        hooks = self.hooks
        if self.transport is not None and hooks.silent(before_send):
            status, got, content = self.transport.send(headers, request["body"])
            parsed = self.read_own(status, got, content)
            if hooks.silent(after_call):
                return status, None, parsed
            return status, LeanResponse(self.url, status, got, content), parsed
        prepared = self.prepared(headers, request["body"])
        _, http = self.events.emit_until_response(before_send, request=prepared)
        if http is None:
            http = self.send(prepared)
        return http.status_code, http, self.read(http.status_code, http.headers, http.content)

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        request = self.build(operation, params)
        answer = self.before_call(operation, request)
        if answer is not None:  # a handler answered instead of DynamoDB
            http, parsed = answer
            status = http.status_code
        else:
            status, http, parsed = self.exchange(operation, request)
            if http is None:  # `result` of an answer that is no error, without the call
                return parsed if status < 300 else self.result(operation, status, parsed)
        self.events.emit(
            self.event_names[operation][2],
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
