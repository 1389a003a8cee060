"""An OpenAI-compatible chat completions gateway, rate limited per API key and model.

    uvicorn examples.gateway.app:app

`Authorization: Bearer <key>` names the entity, the body's `model` the resource. Each
request takes `rpm` 1 and `tpm` = its `max_tokens` up front; when the answer is known
(or, streamed, as each token goes out) the lease is adjusted to the real
`usage.total_tokens`. Environment: `AWS_ENDPOINT_URL`, `ZAEL_NAME` (table, default
`zae-limiter`), `ZAEL_NAMESPACE`, `ZAEL_CREATE_TABLE=1` to create the table (local
engines), `GATEWAY_TOKEN_DELAY` (seconds between streamed tokens, default 0.02).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from zae_limiter import Lease, RateLimiter, Repository
from zae_limiter.asgi import RateLimitMiddleware, Refused, RequestView, bearer, json_field, lease_of

from . import model

ROUTE = "/v1/chat/completions"
DEFAULT_MAX_TOKENS = 256
MAX_TOKENS_CAP = 1_000_000


def max_tokens_of(body: Any) -> int:
    value = body.get("max_tokens", DEFAULT_MAX_TOKENS) if isinstance(body, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TOKENS_CAP:
        raise Refused(
            400, "invalid_request", f"max_tokens must be a whole number from 1 to {MAX_TOKENS_CAP}"
        )
    return value


async def consume(view: RequestView) -> Mapping[str, int]:
    return {"rpm": 1, "tpm": max_tokens_of(await view.json())}


def _chunk(cid: str, name: str, **fields: Any) -> str:
    data = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": name, **fields}  # fmt: skip
    return f"data: {json.dumps(data)}\n\n"


def _usage(result: model.Answer) -> dict[str, int]:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "total_tokens": result.total_tokens,
    }


async def _events(
    result: model.Answer, name: str, lease: Lease | None, charged: int, delay: float
) -> AsyncIterator[str]:
    """SSE chunks; the lease follows what went out, so a cut stream is charged for it."""
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    if lease is not None:
        await lease.adjust(tpm=result.prompt_tokens - charged)
    async for word in model.stream(result, delay):
        yield _chunk(cid, name, choices=[{"index": 0, "delta": {"content": word + " "}}])
        if lease is not None:
            await lease.adjust(tpm=1)
    done = [{"index": 0, "delta": {}, "finish_reason": result.finish_reason}]
    yield _chunk(cid, name, choices=done)
    yield _chunk(cid, name, choices=[], usage=_usage(result))
    yield "data: [DONE]\n\n"


def create_app(
    limiter: Callable[[], RateLimiter] | None = None, *, rate_limited: bool = True
) -> FastAPI:
    """The gateway; `rate_limited=False` is the same app without the middleware (the
    benchmark's baseline). Without `limiter`, one is opened from the environment."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if limiter is not None or not rate_limited:
            yield
            return
        repo = await Repository.open(
            os.environ.get("ZAEL_NAMESPACE") or None,
            name=os.environ.get("ZAEL_NAME", "zae-limiter"),
            endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
            create_table=os.environ.get("ZAEL_CREATE_TABLE") == "1",
        )
        app.state.limiter = RateLimiter(repo)
        try:
            yield
        finally:
            await repo.close()

    app = FastAPI(title="zae-limiter reference gateway", lifespan=lifespan)
    delay = float(os.environ.get("GATEWAY_TOKEN_DELAY", "0.02"))

    @app.post(ROUTE)
    async def chat_completions(request: Request) -> Any:
        body = await request.json()
        name = str(body.get("model", ""))
        charged = max_tokens_of(body)
        result = model.answer(body.get("messages"), charged)
        lease = lease_of(request)
        if body.get("stream"):
            events = _events(result, name, lease, charged, delay)
            return StreamingResponse(events, media_type="text/event-stream")
        if lease is not None:
            await lease.adjust(tpm=result.total_tokens - charged)
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": " ".join(result.words)},
                "finish_reason": result.finish_reason,
            }],
            "usage": _usage(result),
        })  # fmt: skip

    if rate_limited:
        app.add_middleware(
            RateLimitMiddleware,
            limiter=limiter or (lambda: app.state.limiter),
            entity=bearer(),
            resource=json_field("model"),
            consume=consume,
            applies=lambda scope: scope["path"] == ROUTE and scope["method"] == "POST",
        )
    return app


app = create_app()


def baseline() -> FastAPI:
    """The gateway without the rate limiter (`uvicorn --factory ...:baseline`)."""
    return create_app(rate_limited=False)
