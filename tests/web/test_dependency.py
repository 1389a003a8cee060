"""The FastAPI dependency and the middleware on any ASGI app, in process (httpx's ASGI
transport) on the async limiter against a moto server.

No `from __future__ import annotations` here: FastAPI reads `Depends` from the routes'
annotations, and they name a local.
"""

from collections.abc import AsyncIterator
from typing import Annotated, Any

import http_sf
import httpx
import pytest
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import StreamingResponse

from tests.conftest import Clock
from tests.integration.faults import Faults
from zae_limiter import Lease, Limit, RateLimiter, Repository
from zae_limiter.asgi import QuotaView, RateLimitMiddleware, header, path_param
from zae_limiter.asgi.dependency import RateLimit, install

LIMITS = [Limit.per_minute("rpm", 3), Limit.per_day("tpm", 1000)]


@pytest.fixture
async def limiter(moto_http: str, table_name: str, clock: Clock) -> AsyncIterator[RateLimiter]:
    repo = await Repository.open(
        name=table_name, endpoint_url=moto_http, create_table=True, clock=clock
    )
    limiter = RateLimiter(repo)
    await limiter.set_resource_defaults("search", LIMITS)
    yield limiter
    await repo.close()


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def remaining(response: httpx.Response) -> dict[str, int]:
    parsed = http_sf.parse(response.headers["RateLimit"].encode(), tltype="list")
    return {name: params["r"] for name, params in parsed}


def search_app(limiter: RateLimiter, view: QuotaView, flat: bool = True) -> FastAPI:
    app = FastAPI()
    limit = RateLimit(
        limiter,
        entity=path_param("tenant"),
        resource="search",
        consume={"rpm": 1, "tpm": 100},
        quota_view=view,
    )
    if flat:
        install(app)

    @app.get("/{tenant}/search")
    async def search(
        tenant: str, lease: Annotated[Lease, Depends(limit)], used: int = 100, fail: bool = False
    ) -> dict[str, Any]:
        await lease.adjust(tpm=used - 100)
        if fail:
            raise HTTPException(502, "upstream failed")
        return {"tenant": tenant}

    @app.get("/{tenant}/stream")
    async def stream(tenant: str, lease: Annotated[Lease, Depends(limit)]) -> StreamingResponse:
        async def parts() -> AsyncIterator[str]:
            for part in range(5):
                await lease.adjust(tpm=10)
                yield f"part {part}\n"

        return StreamingResponse(parts())

    return app


async def test_dependency_limits_a_route_with_headers_and_a_flat_429(
    limiter: RateLimiter,
) -> None:
    view = QuotaView()
    async with client(search_app(limiter, view)) as http:
        answers = [await http.get("/acme/search", params={"used": 40}) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [remaining(a)["rpm"] for a in answers[:3]] == [2, 1, 0]
    assert [remaining(a)["tpm"] for a in answers[:3]] == [900, 860, 820]
    assert view.reads == 0  # every figure is what the request's own write left
    refused = answers[3]
    assert refused.headers["Retry-After"] == "20"
    assert refused.json()["error"] == "rate_limit_exceeded"
    assert (await limiter.available("acme", "search"))["tpm"] == 1000 - 3 * 40


async def test_without_install_the_body_is_under_detail(limiter: RateLimiter) -> None:
    async with client(search_app(limiter, QuotaView(), flat=False)) as http:
        answers = [await http.get("/acme/search") for _ in range(4)]
    assert answers[3].status_code == 429
    assert answers[3].json()["detail"]["error"] == "rate_limit_exceeded"
    assert "Retry-After" in answers[3].headers


async def test_dependency_gives_back_when_the_handler_raises(limiter: RateLimiter) -> None:
    async with client(search_app(limiter, QuotaView())) as http:
        ok = await http.get("/acme/search")
        failed = await http.get("/acme/search", params={"fail": True, "used": 500})
    assert (ok.status_code, failed.status_code) == (200, 502)
    assert await limiter.available("acme", "search") == {"rpm": 2, "tpm": 900}


async def test_dependency_charges_a_stream_when_it_ends(limiter: RateLimiter) -> None:
    async with client(search_app(limiter, QuotaView())) as http:
        answer = await http.get("/acme/stream")
    assert answer.text.count("part") == 5
    assert (await limiter.available("acme", "search"))["tpm"] == 1000 - 100 - 5 * 10


async def plain_asgi(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI application without any framework: 200, or the status in the path."""
    status = int(scope["path"].strip("/") or 200)
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"done"})


def guarded(limiter: RateLimiter) -> RateLimitMiddleware:
    return RateLimitMiddleware(
        plain_asgi, limiter, entity=header("X-Api-Key"), resource="search", consume={"rpm": 1}
    )


async def test_middleware_on_a_plain_asgi_app_gives_back_on_5xx(limiter: RateLimiter) -> None:
    async with client(guarded(limiter)) as http:
        ok = await http.get("/", headers={"X-Api-Key": "k1"})
        broken = await http.get("/503", headers={"X-Api-Key": "k1"})
        anonymous = await http.get("/")
    assert (ok.status_code, broken.status_code, anonymous.status_code) == (200, 503, 401)
    assert remaining(ok) == {"rpm": 2, "tpm": 1000}
    assert "header 'X-Api-Key'" in anonymous.json()["message"]
    assert (await limiter.available("k1", "search"))["rpm"] == 2


@pytest.mark.parametrize("policy", ["block", "allow"])
async def test_unavailable_follows_the_failure_policy(
    limiter: RateLimiter, policy: str
) -> None:
    faults = Faults(limiter.repository.client)
    app = guarded(RateLimiter(limiter.repository, on_unavailable=policy))  # type: ignore[arg-type]
    faults.fail("server", ops=("UpdateItem", "BatchGetItem", "GetItem", "PutItem"))
    async with client(app) as http:
        answer = await http.get("/", headers={"X-Api-Key": "k2"})
    if policy == "block":
        assert answer.status_code == 503
        assert answer.headers["Retry-After"] == "1"
        assert answer.json()["error"] == "rate_limiter_unavailable"
    else:
        assert answer.status_code == 200
        assert "RateLimit" not in answer.headers  # nothing was taken, nothing to tell


async def test_remaining_counts_what_another_process_took_in_between(
    limiter: RateLimiter, moto_http: str, table_name: str, clock: Clock
) -> None:
    view = QuotaView()
    other_repo = await Repository.open(name=table_name, endpoint_url=moto_http, clock=clock)
    other = RateLimiter(other_repo)
    async with client(search_app(limiter, view)) as http:
        first = await http.get("/acme/search", params={"used": 100})
        async with other.acquire("acme", "search", {"rpm": 1, "tpm": 300}):
            pass
        second = await http.get("/acme/search", params={"used": 100})
    await other_repo.close()
    assert remaining(first) == {"rpm": 2, "tpm": 900}
    assert remaining(second) == {"rpm": 0, "tpm": 500}  # the other process's take included
    assert view.reads == 0


async def test_a_lease_without_a_write_is_followed_from_one_read(limiter: RateLimiter) -> None:
    """A lease served from this client's token reserve saw no item: the view reads the
    bucket once, then subtracts what this process takes."""
    from zae_limiter.flows.acquire import Acquired
    from zae_limiter.flows.write.levels import Taken

    async with limiter.acquire("acme", "search", {"rpm": 1, "tpm": 100}):
        pass  # the bucket now holds 2 rpm and 900 tpm
    limits = tuple(LIMITS)
    served = Taken("acme", "search", 0, {"rpm": 1000}, limits, from_reserve=True)
    lease = Lease(limiter.repository, Acquired((served,), {}, "acme"), {"rpm": 1000})
    assert lease.remaining is None and lease.limits == limits
    view = QuotaView()
    first = await view.admitted(limiter, "acme", "search", lease)
    second = await view.admitted(limiter, "acme", "search", lease)
    assert [(q.limit.name, q.remaining) for q in first] == [("rpm", 2), ("tpm", 900)]
    assert [(q.limit.name, q.remaining) for q in second] == [("rpm", 1), ("tpm", 900)]
    assert view.reads == 1
