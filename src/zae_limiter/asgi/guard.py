"""One request's lease, shared by the middleware and the FastAPI dependency.

`Guard.enter` finds the entity, resource and amounts, acquires, and works out the
headers; `Guard.close` writes the lease's adjustments or gives everything back. Closing
is shielded from cancellation, so a lease is written or given back even when the
request's task is being torn down (a client gone, a server shutting down).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio

from zae_limiter.asgi.extract import Extractor, RequestView, resolve
from zae_limiter.asgi.headers import RETRY_AFTER, Quota, header_pairs
from zae_limiter.asgi.quota import QuotaView
from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded, ZaeLimiterError
from zae_limiter.lease import Lease
from zae_limiter.limiter import RateLimiter

LimiterSource = RateLimiter | Callable[[], RateLimiter]
Headers = list[tuple[bytes, bytes]]
#: Seconds a client is told to wait when DynamoDB cannot be reached and the policy blocks.
UNAVAILABLE_RETRY_AFTER = 1
LEASE_KEY = "zae_limiter.lease"

log = logging.getLogger("zae_limiter")


class _GiveBack(Exception):
    """Thrown into the lease's block to make it give everything back."""


@dataclass(slots=True)
class Held:
    """An admitted request: its lease and what its response headers say."""

    lease: Lease
    entity_id: str
    resource: str
    headers: Headers
    _block: AbstractAsyncContextManager[Lease]
    _before: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Answer:
    """A response the guard gives instead of the application's (429, 503, 401 ...)."""

    status: int
    body: dict[str, Any]
    headers: Headers

    def encoded(self) -> bytes:
        return json.dumps(self.body).encode()


class Guard:
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
        self._limiter = limiter
        self.entity = entity
        self.resource = resource
        self.consume = consume
        self.headers = headers
        self.quotas = quota_view if quota_view is not None else QuotaView()

    @property
    def limiter(self) -> RateLimiter:
        found = self._limiter
        return found if isinstance(found, RateLimiter) else found()

    async def enter(self, view: RequestView) -> Held | Answer:
        """Acquire for this request, or the answer that refuses it. `Refused` (from an
        extractor) and errors other than the limiter's propagate."""
        entity_id = await resolve(self.entity, view)
        resource = await resolve(self.resource, view)
        consume = await resolve(self.consume, view)
        limiter = self.limiter
        block = limiter.acquire(entity_id, resource, consume)
        try:
            lease = await block.__aenter__()
        except RateLimitExceeded as error:
            return await self._limited(limiter, entity_id, resource, error)
        except RateLimiterUnavailable as error:
            return unavailable(error)
        quotas: list[Quota] = []
        if self.headers and lease.degraded is None:
            quotas = await self.quotas.admitted(limiter, entity_id, resource, lease)
        return Held(lease, entity_id, resource, header_pairs(quotas), block, lease.consumed)

    async def _limited(
        self, limiter: RateLimiter, entity_id: str, resource: str, error: RateLimitExceeded
    ) -> Answer:
        headers: Headers = [(RETRY_AFTER, error.retry_after_header.encode())]
        if self.headers:
            policy, quotas = await self.quotas.rejected(limiter, entity_id, resource, error)
            headers += header_pairs(quotas, policy)
        return Answer(429, error.as_dict(), headers)

    async def close(self, held: Held, give_back: bool) -> None:
        """Write the lease's adjustments, or give back all it took."""
        error: tuple[type[BaseException] | None, BaseException | None, None] = (None, None, None)
        extra = _minus(held.lease.consumed, held._before)
        if give_back:
            extra, error = _negated(held._before), (_GiveBack, _GiveBack(), None)
        with anyio.CancelScope(shield=True):
            try:
                await held._block.__aexit__(*error)
            except ZaeLimiterError as failed:
                # The response is out; the caller can do nothing about a lost write.
                log.warning("lease of %s/%s not closed: %s", held.entity_id, held.resource, failed)
                return
        self.quotas.settled(held.entity_id, held.resource, extra)


def unavailable(error: RateLimiterUnavailable) -> Answer:
    body = {
        "error": "rate_limiter_unavailable",
        "message": f"the rate limiter cannot decide now; retry later ({error})",
    }
    return Answer(503, body, [(RETRY_AFTER, str(UNAVAILABLE_RETRY_AFTER).encode())])


def _minus(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    return {n: after.get(n, 0) - before.get(n, 0) for n in set(after) | set(before)}


def _negated(amounts: Mapping[str, int]) -> dict[str, int]:
    return {n: -v for n, v in amounts.items()}
