"""The in-memory state a flow may consult: table, namespace and the client's caches.

Nothing here performs I/O; the repository owns one `RepoState` and hands it to flows.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from zae_limiter.bucket import LimitState
from zae_limiter.config_cache import ConfigCache
from zae_limiter.flows.reserves.book import ReserveBook
from zae_limiter.keys import WINDOW_MS
from zae_limiter.limits import Limit

DEFAULT_PARTITION_WCU = 1000
DEFAULT_MAX_SHARDS = 256


#: A client whose view of a window is older than this cannot know whether someone else
#: restarted it since; it restarts the window only once it is this old.
STALE_WINDOW_MS = 4 * WINDOW_MS


@dataclass(frozen=True, slots=True)
class WindowSeen:
    """A shard's write-rate window as an ALL_NEW showed it: `writes` since `start_ms`."""

    start_ms: int
    writes: int
    seen_ms: int
    partition_wcu: int
    #: The shard count the item recorded: evidence from before a doubling is stale.
    shard_count: int = 1
    #: The window before this one (it ended at `start_ms`): start (-1: none) and writes.
    prev_start_ms: int = -1
    prev_writes: int = 0


@dataclass(slots=True)
class EntityMeta:
    """Immutable facts about an entity (cascade, parent) and the shard counts seen."""

    cascade: bool
    parent_id: str | None
    shard_counts: dict[str, int] = field(default_factory=dict)
    #: Write-rate window start (ms) last seen per (resource, shard).
    windows: dict[tuple[str, int], int] = field(default_factory=dict)
    #: The last window this client saw after a write of its own, per (resource, shard):
    #: the evidence it has when a later write there is throttled.
    seen_windows: dict[tuple[str, int], WindowSeen] = field(default_factory=dict)
    #: When this client last read a shard's window after a throttle (ms), per (resource,
    #: shard): flows/scaling/evidence.py reads it at most every EVIDENCE_READ_MS.
    evidence_reads: dict[tuple[str, int], int] = field(default_factory=dict)
    #: This client's failed conditional writes per resource that no write of its own has
    #: counted in a shard's window yet, and when (ms; flows/write/take.py).
    failed_writes: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: When this client last tried to double a resource's shards (ms).
    doubling_tried: dict[str, int] = field(default_factory=dict)
    #: The item as this client's last write to each (resource, shard) left it (ALL_NEW):
    #: the next write there picks its forms from it (keys/takes.py).
    images: dict[tuple[str, int], Any] = field(default_factory=dict)
    #: When each image was taken (this client's clock, ms): a write planned from it must
    #: name every reserve epoch that may have been raised since (flows/write/plan.py).
    image_at: dict[tuple[str, int], int] = field(default_factory=dict)
    #: A doubling that was throttled: (count it starts from, evidence since), to ride on
    #: this client's next write to shard 0.
    want_double: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: After throttles on a resource: (no write before this time in ms, throttles in a
    #: row), so this client's other acquires wait instead of piling on (flows/scaling/throttled.py).
    throttled_until: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: While acquires wait for a reserve: until when one of them writes for it (ms), per
    #: resource, so this client's waiting acquires write one at a time.
    leading: dict[str, int] = field(default_factory=dict)
    #: When this client's last throttled write to a resource was refused (ms).
    refused_at: dict[str, int] = field(default_factory=dict)
    #: Resources that cascade, or do not, whatever `cascade` says (Entity.cascade_for).
    cascade_for: dict[str, bool] = field(default_factory=dict)
    #: Learned from the entity's record (True), or only from buckets: `cascade` is then
    #: one resource's, and a resource not in `cascade_for` is not known to cascade.
    record: bool = True
    #: The entity's acquires take nothing (known from its record only).
    bypass: bool = False

    def cascades(self, resource: str) -> bool:
        """Whether acquires of `resource` take from the parent, as far as known (not
        known: no; the child's bucket then says, see flows/acquire.py)."""
        if self.parent_id is None:
            return False
        return self.cascade_for.get(resource, self.cascade and self.record)


@dataclass(frozen=True, slots=True)
class Exhausted:
    """A bucket seen short of tokens: its limits and held counts then (an unsharded
    bucket), and when it will have enough."""

    until_ms: int
    limits: dict[str, LimitState]
    held: dict[str, int]


def shared_rng() -> random.Random:
    """The generator behind the `random` module's functions (seeded by `random.seed`)."""
    return cast(random.Random, getattr(random, "_inst"))  # noqa: B009 - not in typeshed


@dataclass(slots=True)
class RepoState:
    table: str
    namespace: str
    config_cache: ConfigCache[tuple[Limit, ...]]
    partition_wcu: int = DEFAULT_PARTITION_WCU
    #: Doubling stops here; 1 turns sharding off (every bucket stays on one partition).
    max_shards: int = DEFAULT_MAX_SHARDS
    entities: dict[str, EntityMeta] = field(default_factory=dict)
    exhausted: dict[tuple[str, str], Exhausted] = field(default_factory=dict)
    #: Token reserves of hot buckets (None: reserves off, one write per acquire).
    reserves: ReserveBook | None = None
    #: Every random draw a flow makes (which shard, how long a backoff) comes from here:
    #: give a `random.Random(seed)` to replay a run. The default is the process's shared
    #: generator, the one `random.seed` seeds.
    rng: random.Random = field(default_factory=lambda: shared_rng())
    #: Whether bucket writes carry a `ttl` (flows/expiry.py): only on a table at schema 5
    #: or later, whose clients all move it (flows/records/table.py learns it at open).
    bucket_expiry: bool = True
    #: The bucket TTL each config level stores (None: none), refreshed with its limits.
    level_ttls: dict[Hashable, int | None] = field(default_factory=dict)
    #: The idle TTL an acquire resolved per (entity, resource), for its later charges.
    bucket_ttls: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Global limits' regional shares (flows/regional_limits.SharesBook), made by the face
    #: before the first acquire; None: no global limit here, nothing read or written.
    shares: Any = None

    def learn_entity(
        self,
        entity_id: str,
        cascade: bool,
        parent_id: str | None,
        cascade_for: Mapping[str, bool] | None = None,
        *,
        of: str | None = None,
        bypass: bool = False,
    ) -> EntityMeta:
        """What this client knows of the entity, learned once: from its record (with its
        `cascade_for`), or from a bucket of resource `of`, whose cascade is that
        resource's (the record says for the others)."""
        meta = self.entities.get(entity_id)
        if meta is None:
            meta = EntityMeta(cascade, parent_id, record=of is None, bypass=bypass)
            self.entities[entity_id] = meta
        elif meta.record or (of is not None and of in meta.cascade_for):
            return meta  # what is known stays until the cache forgets the entity
        elif of is None:  # the record, after buckets: it is the truth for every resource
            meta.cascade, meta.parent_id, meta.record = cascade, parent_id, True
            meta.bypass = bypass
        if cascade_for:
            meta.cascade_for.update(cascade_for)
        if of is not None:
            meta.cascade_for[of] = cascade
        return meta

    def window_needs_reset(self, entity_id: str, resource: str, shard: int, now_ms: int) -> bool:
        """Restart the window only when it is known to be old.

        A restart drops the count. A client that never saw the window, or saw it long ago,
        does not know whether another client restarted it since: with many clients that
        each write a shard now and then, blind restarts would keep every window too short
        to measure anything.
        """
        meta = self.entities.get(entity_id)
        start = None if meta is None else meta.windows.get((resource, shard))
        if meta is None or start is None or now_ms - start < WINDOW_MS:
            return False
        seen = meta.seen_windows.get((resource, shard))
        fresh = seen is not None and now_ms - seen.seen_ms < WINDOW_MS
        return fresh or now_ms - start >= STALE_WINDOW_MS

    def shard_count(self, entity_id: str, resource: str) -> int:
        meta = self.entities.get(entity_id)
        return 1 if meta is None else meta.shard_counts.get(resource, 1)
