"""A FastAPI dependency: per-route rate limits, the lease handed to the handler.

    limit = RateLimit(get_limiter, entity=bearer(), resource="search", consume={"rpm": 1})

    @app.get("/search")
    async def search(q: str, lease: Lease = Depends(limit)) -> dict[str, Any]:
        ...

The lease ends after the response was sent (FastAPI's request scope for dependencies
with `yield`), so a streamed response is charged for what it reported by then. An
exception in the handler gives everything back. A refused request raises `RateLimited`
(an `HTTPException`: 429, 503, 401 ...); `install(app)` renders its body flat, as the
middleware does, instead of under FastAPI's `detail`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from zae_limiter.asgi.extract import ClientGone, Extractor, Refused, RequestView
from zae_limiter.asgi.guard import Answer, Guard, LimiterSource
from zae_limiter.asgi.quota import QuotaView
from zae_limiter.lease import Lease


class RateLimited(HTTPException):
    """The dependency refused the request; `detail` is the JSON body."""

    def __init__(self, answer: Answer) -> None:
        headers = {k.decode(): v.decode() for k, v in answer.headers}
        super().__init__(answer.status, detail=answer.body, headers=headers)
        self.body = answer.body


class _RouteView(RequestView):
    """The body through FastAPI's `Request`, which keeps it for the body parameters."""

    def __init__(self, request: Request) -> None:
        super().__init__(request.scope, request.receive)
        self._request = request

    async def body(self) -> bytes:
        return await self._request.body()


class RateLimit:
    """Dependency guarding a route; yields the request's `Lease`.

    Same extractors as the middleware (`path_param()` works here: the route is matched).
    Headers go on the response FastAPI builds from the handler's return value; a handler
    that returns its own `Response` copies them from `headers_of(request)`.
    """

    def __init__(
        self,
        limiter: LimiterSource,
        *,
        entity: Extractor[str],
        resource: Extractor[str],
        consume: Extractor[Mapping[str, int]],
        headers: bool = True,
        quota_view: QuotaView | None = None,
    ) -> None:
        self.guard = Guard(
            limiter,
            entity=entity,
            resource=resource,
            consume=consume,
            headers=headers,
            quota_view=quota_view,
        )

    async def __call__(self, request: Request, response: Response) -> AsyncIterator[Lease]:
        try:
            got = await self.guard.enter(_RouteView(request))
        except Refused as refused:
            raise RateLimited(Answer(refused.status, refused.body(), _pairs(refused))) from None
        except ClientGone:
            raise RateLimited(Answer(499, {"error": "client_closed_request"}, [])) from None
        if isinstance(got, Answer):
            raise RateLimited(got)
        shown = {k.decode(): v.decode() for k, v in got.headers}
        response.headers.update(shown)
        request.state.rate_limit_headers = shown
        try:
            yield got.lease
        except BaseException:
            await self.guard.close(got, give_back=True)
            raise
        await self.guard.close(got, give_back=False)


def headers_of(request: Request) -> dict[str, str]:
    """The RateLimit header fields the dependency computed for this request."""
    return dict(getattr(request.state, "rate_limit_headers", {}))


def _pairs(refused: Refused) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in refused.headers.items()]


async def _flat(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RateLimited)
    body: Any = exc.body
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


def install(app: FastAPI) -> None:
    """Answer `RateLimited` with its JSON body as is (not wrapped in `detail`)."""
    app.add_exception_handler(RateLimited, _flat)
