"""The demo's story: an LLM gateway with one project, its API keys, and a hot batch tenant.

Nothing here draws anything; the functions return what happened and `view` shows it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from zae_limiter.errors import RateLimitExceeded
from zae_limiter.limiter import SyncRateLimiter
from zae_limiter.limits import Limit

RESOURCE = "gpt-4"
PROJECT = "acme"
TIGHT_KEY = "acme-key-1"
OPEN_KEY = "acme-key-2"
HOT = "globex-batch"
#: Write limit per second of one bucket partition, as the hot entity's client sets it:
#: low enough that three client threads on a busy 2-core machine prove it hot.
HOT_PARTITION_WCU = 10

RESOURCE_DEFAULTS = (Limit.per_minute("rpm", 600), Limit.per_minute("tpm", 200_000))
#: The project's daily token budget refills slowly (23 tokens/s), so the one call's 320
#: tokens still show in its balance when it is read back (a per-minute budget of this
#: size refills them within a tenth of a second).
PROJECT_LIMITS = (Limit.per_minute("rpm", 600), Limit.per_day("tpm", 2_000_000))
TIGHT_LIMITS = (Limit.per_minute("rpm", 20), Limit.per_minute("tpm", 10_000))
HOT_LIMITS = (Limit.per_minute("rpm", 60_000), Limit.per_minute("tpm", 6_000_000))


@dataclass(frozen=True, slots=True)
class EntityRow:
    entity_id: str
    name: str
    parent: str
    cascade: bool
    limits: str
    source: str


def create_entities(limiter: SyncRateLimiter) -> list[EntityRow]:
    """The project, two keys cascading to it, and the hot tenant; limits at two levels."""
    limiter.create_entity(PROJECT, name="Acme Corp")
    limiter.create_entity(TIGHT_KEY, name="Acme key 1", parent_id=PROJECT, cascade=True)
    limiter.create_entity(OPEN_KEY, name="Acme key 2", parent_id=PROJECT, cascade=True)
    limiter.create_entity(HOT, name="Globex nightly batch")
    limiter.set_resource_defaults(RESOURCE, RESOURCE_DEFAULTS)
    limiter.set_limits(PROJECT, PROJECT_LIMITS, resource=RESOURCE)
    limiter.set_limits(TIGHT_KEY, TIGHT_LIMITS, resource=RESOURCE)
    limiter.set_limits(HOT, HOT_LIMITS, resource=RESOURCE)
    rows = []
    for entity_id in (PROJECT, TIGHT_KEY, OPEN_KEY, HOT):
        entity = limiter.get_entity(entity_id)
        resolved = limiter.resolve_limits(entity_id, RESOURCE)
        limits = () if resolved is None else resolved.limits
        rows.append(
            EntityRow(
                entity_id,
                (entity.name if entity else None) or "-",
                (entity.parent_id if entity else None) or "-",
                bool(entity and entity.cascade),
                ", ".join(f"{lim.name} {lim.describe()}" for lim in limits),
                "none" if resolved is None else resolved.source,
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class OneCall:
    """One gateway call: tokens estimated up front, then adjusted to the real count."""

    entity_id: str
    estimate: int
    actual: int
    before: dict[str, int]
    after: dict[str, int]
    parent_before: dict[str, int]
    parent_after: dict[str, int]


def one_call(limiter: SyncRateLimiter, estimate: int = 500, actual: int = 320) -> OneCall:
    before = limiter.available(TIGHT_KEY, RESOURCE)
    parent_before = limiter.available(PROJECT, RESOURCE)
    with limiter.acquire(TIGHT_KEY, RESOURCE, {"rpm": 1, "tpm": estimate}) as lease:
        lease.adjust(tpm=actual - estimate)  # the model answered: give back what was unused
    after = limiter.available(TIGHT_KEY, RESOURCE)
    parent_after = limiter.available(PROJECT, RESOURCE)
    return OneCall(TIGHT_KEY, estimate, actual, before, after, parent_before, parent_after)


@dataclass(frozen=True, slots=True)
class Burst:
    admitted: int
    rejected_at: int | None
    retry_after_seconds: float | None
    retry_after_header: str | None
    body: dict[str, Any] | None


def burst(limiter: SyncRateLimiter, calls: int = 30, estimate: int = 400) -> Burst:
    """Fire `calls` acquires back to back at the tight key until one is refused."""
    admitted = 0
    for number in range(1, calls + 1):
        try:
            with limiter.acquire(TIGHT_KEY, RESOURCE, {"rpm": 1, "tpm": estimate}):
                admitted += 1
        except RateLimitExceeded as refused:
            return Burst(
                admitted,
                number,
                refused.retry_after_seconds,
                refused.retry_after_header,
                refused.as_dict(),
            )
    return Burst(admitted, None, None, None, None)


def llm_call(limiter: SyncRateLimiter, entity_id: str, rng: random.Random) -> None:
    """One gateway request: reserve an estimate, then settle on the tokens really used."""
    estimate = rng.randint(200, 800)
    with limiter.acquire(entity_id, RESOURCE, {"rpm": 1, "tpm": estimate}) as lease:
        actual = max(1, int(estimate * rng.uniform(0.5, 1.3)))
        lease.adjust(tpm=actual - estimate)
