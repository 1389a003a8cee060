"""Frozen value objects shared by the flows, the faces and the CLI."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from zae_limiter.bucket import LimitState
from zae_limiter.limit_status import LimitStatus as LimitStatus  # re-exported
from zae_limiter.limits import RESERVED_LIMIT_NAMES, Limit

#: Where a resolved limit came from, most specific first.
LimitSource = Literal["entity", "entity_default", "resource", "system", "call"]


@dataclass(frozen=True, slots=True)
class Entity:
    entity_id: str
    name: str | None = None
    parent_id: str | None = None
    cascade: bool = False
    created_at_ms: int | None = None
    #: Resources whose acquires cascade (True) or do not (False) whatever `cascade`
    #: says, as sorted (resource, cascades) pairs.
    cascade_for: tuple[tuple[str, bool], ...] = ()
    #: Acquires of this entity take nothing and never reject (an internal key); audited.
    bypass: bool = False

    def cascades(self, resource: str) -> bool:
        """Whether an acquire of `resource` also takes from the parent."""
        return self.parent_id is not None and dict(self.cascade_for).get(resource, self.cascade)


@dataclass(frozen=True, slots=True)
class BucketState:
    """One bucket item: all limits of an (entity, resource, shard), as stored.

    `limits` may include the hidden `wcu` limit; use `user_limits` for anything shown.
    """

    entity_id: str
    resource: str
    shard_id: int
    shard_count: int
    last_refill_ms: int
    limits: Mapping[str, LimitState]
    cascade: bool = False
    parent_id: str | None = None
    partition_wcu: int = 1000
    window_start_ms: int = -1
    window_writes: int = 0
    #: Held in token reserves: limit -> epoch -> millitokens (`keys.held_milli` reads it).
    reserved: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    #: Schema-v2 tokens (`tk` as of `last_refill_ms`) of limits not converted yet.
    legacy_tokens: Mapping[str, int] = field(default_factory=dict)
    #: Full-at values as of the last count raise (or the split that made the shard): what
    #: shards that the raise made and that do not exist yet split off (keys.snapshot_parts).
    split_full_at: Mapping[str, int] = field(default_factory=dict)

    @property
    def user_limits(self) -> dict[str, LimitState]:
        return {n: s for n, s in self.limits.items() if n not in RESERVED_LIMIT_NAMES}


@dataclass(frozen=True, slots=True)
class ResolvedLimits:
    limits: tuple[Limit, ...]
    source: LimitSource
    #: The bucket TTL (seconds) of the most specific level that stores one; None: none
    #: does (the default applies, flows/write/plan.py).
    bucket_ttl_s: int | None = None

    def by_name(self) -> dict[str, Limit]:
        return {limit.name: limit for limit in self.limits}


@dataclass(frozen=True, slots=True)
class ShardInfo:
    entity_id: str
    resource: str
    shard_id: int
    shard_count: int
    capacity: dict[str, int]
    tokens: dict[str, int]
    write_pressure_pct: float
    #: Milliseconds until every limit of the shard is full again.
    full_in_ms: int
    #: Whole tokens per limit that clients hold in reserves from this shard right now.
    reserved: dict[str, int] = field(default_factory=dict)
    #: Per quota limit: when its current window ends (ms since the epoch); a session
    #: quota with no session open is absent.
    resets_at_ms: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UsageSnapshot:
    entity_id: str
    resource: str
    window: str
    window_start: str
    counters: dict[str, int] = field(default_factory=dict)
    total_events: int = 0


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int
    misses: int
    size: int
    ttl_seconds: float


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """Tokens consumed per limit, and events, over the snapshots of one window kind."""

    window: str
    entity_id: str | None = None
    resource: str | None = None
    start: str | None = None
    end: str | None = None
    snapshots: int = 0
    total_events: int = 0
    counters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One recorded change of configuration: when, who, what, and the values around it."""

    event_id: str
    at_ms: int
    principal: str
    action: str
    namespace: str
    entity_id: str | None = None
    resource: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "at_ms": self.at_ms,
            "principal": self.principal,
            "action": self.action,
            "namespace": self.namespace,
            "entity_id": self.entity_id,
            "resource": self.resource,
            "before": self.before,
            "after": self.after,
        }
