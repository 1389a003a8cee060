"""RateLimitMiddleware: a pure ASGI middleware that guards every matching request.

It acquires before the application runs and closes the lease when the application has
returned, which for a streamed response is when the stream ended: whatever the handler
reported with `lease.adjust(...)` up to then is written, including when the client went
away mid-stream. The lease gives everything back when the application raised before any
response was sent, or answered with a status `give_back` picks (5xx by default).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from zae_limiter.asgi.extract import (
    DEFAULT_MAX_BODY,
    ClientGone,
    Extractor,
    Message,
    Receive,
    Refused,
    RequestView,
    Scope,
)
from zae_limiter.asgi.guard import LEASE_KEY, Answer, Guard, Held, LimiterSource
from zae_limiter.asgi.quota import QuotaView
from zae_limiter.lease import Lease

Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def server_error(status: int) -> bool:
    return status >= 500


def lease_of(scope_or_request: Any) -> Lease | None:
    """The lease of the request being served (a Starlette `Request` or an ASGI scope), for
    the handler to report what it really used: `await lease_of(request).adjust(tpm=...)`."""
    scope = getattr(scope_or_request, "scope", scope_or_request)
    found = scope.get("state", {}).get(LEASE_KEY)
    return found if isinstance(found, Lease) else None


class RateLimitMiddleware:
    """Guard `app`'s HTTP requests with `limiter` (a `RateLimiter` or a callable that
    returns one, e.g. one opened in the app's lifespan).

    `entity`, `resource` and `consume` are values or extractors (see `extract`); `applies`
    picks the requests to guard (default: all). `headers=False` leaves out the RateLimit
    header fields (and the read that starts each bucket's estimate, see `quota`).
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: LimiterSource,
        *,
        entity: Extractor[str],
        resource: Extractor[str],
        consume: Extractor[Mapping[str, int]],
        applies: Callable[[Scope], bool] | None = None,
        give_back: Callable[[int], bool] = server_error,
        headers: bool = True,
        quota_view: QuotaView | None = None,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.app = app
        self.guard = Guard(
            limiter,
            entity=entity,
            resource=resource,
            consume=consume,
            headers=headers,
            quota_view=quota_view,
        )
        self.applies = applies
        self.give_back = give_back
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (self.applies is not None and not self.applies(scope)):
            await self.app(scope, receive, send)
            return
        view = RequestView(scope, receive, self.max_body)
        try:
            got = await self.guard.enter(view)
        except Refused as refused:
            headers = [(k.lower().encode(), v.encode()) for k, v in refused.headers.items()]
            got = Answer(refused.status, refused.body(), headers)
        except ClientGone:
            return
        if isinstance(got, Answer):
            await view.drain()
            await respond(send, got)
            return
        await self._serve(scope, view, send, got)

    async def _serve(self, scope: Scope, view: RequestView, send: Send, held: Held) -> None:
        scope.setdefault("state", {})[LEASE_KEY] = held.lease
        status: list[int] = []

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
                message = {**message, "headers": [*message.get("headers", []), *held.headers]}
            await send(message)

        try:
            await self.app(scope, view.receive, send_with_headers)
        except BaseException:
            # Once a response has started the client got something for its tokens.
            await self.guard.close(held, give_back=not status)
            raise
        await self.guard.close(held, give_back=not status or self.give_back(status[0]))


async def respond(send: Send, answer: Answer) -> None:
    body = answer.encoded()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *answer.headers,
    ]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
