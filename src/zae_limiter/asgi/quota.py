"""What the RateLimit header says is left, without a read per request.

An acquire that wrote the entity's bucket knows what the write left (`Lease.remaining`:
the item DynamoDB returned, other processes' takes included): that figure is the header,
exact as of this request, and the estimate restarts from it. When the acquire made no
write (served from this client's token reserve), the view follows its last figure
locally: this process's own takes, adjustments and give-backs are subtracted and the
refill is added with the bucket's own arithmetic; with no figure yet, or one older than
`refresh_seconds`, it reads the bucket once with `available()`. So `r` is exact after
each write and approximate only between them (token reserves, or several processes
between a reserve's top-ups); for a sharded entity it is one shard's figure times the
shard count. `Retry-After` on a 429 is always exact.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace

from zae_limiter.asgi.headers import Quota, quota
from zae_limiter.bucket import LimitState
from zae_limiter.errors import RateLimitExceeded, ZaeLimiterError
from zae_limiter.lease import Lease
from zae_limiter.limiter import RateLimiter
from zae_limiter.limits import Limit

DEFAULT_REFRESH_SECONDS = 5.0
DEFAULT_MAX_BUCKETS = 10_000


@dataclass(slots=True)
class _Bucket:
    limits: tuple[Limit, ...]
    tokens_milli: dict[str, int]
    at_ms: int
    read_ms: int

    def advance(self, now_ms: int) -> None:
        if now_ms <= self.at_ms:
            return
        for limit in self.limits:
            state = LimitState(
                capacity_milli=limit.capacity_milli,
                refill_amount_milli=limit.refill_amount_milli,
                refill_period_ms=limit.refill_period_ms,
            )
            # The bucket as it stood at `at_ms`, seen again at `now_ms`.
            then = replace(
                state, full_at=state.with_tokens(self.tokens_milli[limit.name], self.at_ms)
            )
            self.tokens_milli[limit.name] = then.tokens(now_ms)
        self.at_ms = now_ms

    def take(self, amounts: Mapping[str, int]) -> None:
        for name, tokens in amounts.items():
            if name in self.tokens_milli:
                self.tokens_milli[name] -= tokens * 1000

    def quotas(self) -> list[Quota]:
        return [quota(limit, self.tokens_milli[limit.name]) for limit in self.limits]


class QuotaView:
    """Per-process estimate of each bucket's tokens, for the RateLimit header."""

    def __init__(
        self,
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        max_buckets: int = DEFAULT_MAX_BUCKETS,
    ) -> None:
        self.refresh_ms = int(refresh_seconds * 1000)
        self.max_buckets = max_buckets
        self._buckets: OrderedDict[tuple[str, str], _Bucket] = OrderedDict()
        #: Reads made to (re)start an estimate; for tests and the benchmark.
        self.reads = 0

    async def admitted(
        self, limiter: RateLimiter, entity_id: str, resource: str, lease: Lease
    ) -> list[Quota]:
        """The quotas right after `lease` was acquired; [] when they cannot be known."""
        limits = lease.limits
        if not limits:
            return []
        key = (entity_id, resource)
        now = limiter.repository.now_ms()
        seen = lease.remaining
        if seen is not None:  # what this request's own write left
            tokens = {limit.name: seen.get(limit.name, 0) * 1000 for limit in limits}
            return self._keep(key, _Bucket(limits, tokens, now, now)).quotas()
        bucket = self._buckets.get(key)
        if bucket is None or bucket.limits != limits or now - bucket.read_ms >= self.refresh_ms:
            bucket = await self._read(limiter, key, limits, now)
            if bucket is None:
                return []
        else:
            bucket.advance(now)
            bucket.take(lease.consumed)
        return bucket.quotas()

    async def _read(
        self, limiter: RateLimiter, key: tuple[str, str], limits: tuple[Limit, ...], now: int
    ) -> _Bucket | None:
        self.reads += 1
        try:
            tokens = await limiter.available(key[0], key[1], limits=limits)
        except ZaeLimiterError:
            return None  # the headers are a courtesy: never fail a request for them
        bucket = _Bucket(limits, {n.name: tokens.get(n.name, 0) * 1000 for n in limits}, now, now)
        return self._keep(key, bucket)

    def _keep(self, key: tuple[str, str], bucket: _Bucket) -> _Bucket:
        self._buckets[key] = bucket
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_buckets:
            self._buckets.popitem(last=False)
        return bucket

    def settled(self, entity_id: str, resource: str, extra: Mapping[str, int]) -> None:
        """Whole tokens taken (positive) or given back (negative) when a lease ended."""
        bucket = self._buckets.get((entity_id, resource))
        if bucket is not None:
            bucket.take(extra)

    async def rejected(
        self, limiter: RateLimiter, entity_id: str, resource: str, error: RateLimitExceeded
    ) -> tuple[list[Limit], list[Quota]]:
        """The policy and the violated limits' quotas for a 429; the estimate restarts."""
        bucket = self._buckets.pop((entity_id, resource), None)
        if bucket is not None:
            limits = list(bucket.limits)
        else:
            limits = await _resolved(limiter, entity_id, resource)
        by_name = {limit.name: limit for limit in limits}
        quotas = [
            quota(by_name[v.limit_name], v.available * 1000)
            for v in error.violations
            if v.entity_id == entity_id and v.limit_name in by_name
        ]
        return limits, quotas


async def _resolved(limiter: RateLimiter, entity_id: str, resource: str) -> list[Limit]:
    try:
        found = await limiter.resolve_limits(entity_id, resource)
    except ZaeLimiterError:
        return []
    return list(found.limits) if found is not None else []
