"""The in-memory state a flow may consult: table, namespace and the client's caches.

Nothing here performs I/O; the repository owns one `RepoState` and hands it to flows.
What a client knows of an entity is an `EntityState`: the entity's facts (immutable,
replaced whole when they change) and one owner per subject of what changes, each kept in
the room of its subject, so each piece of state has one writer.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from zae_limiter.bucket import LimitState
from zae_limiter.config_cache import ConfigCache
from zae_limiter.flows.reserves.book import ReserveBook
from zae_limiter.flows.scaling.gate import ThrottleGate
from zae_limiter.flows.scaling.knowledge import ShardKnowledge
from zae_limiter.flows.write.images import BucketImages, UncountedWrites
from zae_limiter.limits import Limit

DEFAULT_PARTITION_WCU = 1000
DEFAULT_MAX_SHARDS = 256

_NO_CHOICES: Mapping[str, bool] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class EntityFacts:
    """What a client knows of an entity's record: cascade, parent, bypass."""

    cascade: bool
    parent_id: str | None
    #: Resources that cascade, or do not, whatever `cascade` says (Entity.cascade_for).
    cascade_for: Mapping[str, bool] = field(default_factory=lambda: _NO_CHOICES)
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

    def choosing(self, choices: Mapping[str, bool]) -> EntityFacts:
        """These facts with more per-resource choices (they win over the known ones)."""
        if not choices:
            return self
        return replace(self, cascade_for=MappingProxyType({**self.cascade_for, **choices}))


class EntityState:
    """All one client knows of one entity. `facts` is replaced whole, only in this module
    (`Entities.learn`, `moved`); each other field is the one owner of its subject's state."""

    __slots__ = ("facts", "gate", "images", "shards", "uncounted")

    def __init__(self, facts: EntityFacts) -> None:
        self.facts = facts
        #: Shard counts, windows seen, doubling tries (flows/scaling/knowledge.py).
        self.shards = ShardKnowledge()
        #: The throttle gate, refusals, the reserve lead (flows/scaling/gate.py).
        self.gate = ThrottleGate()
        #: The last image of each shard this client wrote (flows/write/images.py).
        self.images = BucketImages()
        #: Failed writes no window has counted yet (flows/write/images.py).
        self.uncounted = UncountedWrites()

    def moved(self, parent_id: str, resource: str, cascade: bool) -> None:
        """Shard 0 of `resource` names a new parent (flows/write/memory.py `follow_move`)."""
        self.facts = replace(self.facts, parent_id=parent_id).choosing({resource: cascade})


class Entities(dict[str, EntityState]):
    """The entities this client knows, by id (learned from records and bucket items).
    A dict, so the hot path's lookups cost what a dict's do; only `learn` adds to it."""

    __slots__ = ()

    def learn(
        self,
        entity_id: str,
        cascade: bool,
        parent_id: str | None,
        cascade_for: Mapping[str, bool] | None = None,
        *,
        of: str | None = None,
        bypass: bool = False,
        reread: bool = False,
    ) -> EntityState:
        """What this client knows of the entity: from its record (with its `cascade_for`),
        or from a bucket of resource `of`, whose cascade is that resource's (the record
        says for the others). A bucket teaches only what is not known yet; a record read
        again (`reread`, with the entity's limits once their cache entry expired) replaces
        the facts whole, so another client's update or move is seen within that TTL."""
        known = self.get(entity_id)
        if known is None:
            facts = EntityFacts(cascade, parent_id, record=of is None, bypass=bypass)
            known = self[entity_id] = EntityState(facts)
        elif reread and of is None:
            facts = EntityFacts(cascade, parent_id, record=True, bypass=bypass)
        else:
            facts = known.facts
            if facts.record or (of is not None and of in facts.cascade_for):
                return known  # what is known stays until the cache forgets the entity
            if of is None:  # the record, after buckets: the truth for every resource
                facts = EntityFacts(cascade, parent_id, facts.cascade_for, True, bypass)
        choices = dict(cascade_for or {})
        if of is not None:
            choices[of] = cascade
        known.facts = facts.choosing(choices)
        return known

    def forget(self, entity_id: str) -> None:
        """The entity changed (or went): learn it again from its record."""
        self.pop(entity_id, None)


@dataclass(frozen=True, slots=True)
class Exhausted:
    """A bucket seen short of tokens: its limits and held counts then (an unsharded
    bucket), and when it will have enough."""

    until_ms: int
    limits: dict[str, LimitState]
    held: dict[str, int]


@dataclass(slots=True)
class RepoState:
    table: str
    namespace: str
    config_cache: ConfigCache[tuple[Limit, ...]]
    partition_wcu: int = DEFAULT_PARTITION_WCU
    #: Doubling stops here; 1 turns sharding off (every bucket stays on one partition).
    max_shards: int = DEFAULT_MAX_SHARDS
    entities: Entities = field(default_factory=Entities)
    exhausted: dict[tuple[str, str], Exhausted] = field(default_factory=dict)
    #: Token reserves of hot buckets (None: reserves off, one write per acquire).
    reserves: ReserveBook | None = None
    #: Every random draw a flow makes comes from the state, never from the `random`
    #: module's own generator: which shard here (and a lost race's backoff), how long a
    #: throttled write or a reserve waits in `jitter`. Two streams, so that a change in how
    #: often a flow waits does not move the shard choices after it. Seeded from the OS
    #: unless the state's maker gives a seed (repository.py `_state`; the simulator seeds
    #: its world's), so a run replays.
    rng: random.Random = field(default_factory=random.Random)
    jitter: random.Random = field(default_factory=random.Random)
    #: Whether bucket writes carry a `ttl` (flows/write/plan.py): only on a table at schema 5
    #: or later, whose clients all move it (flows/records/table.py learns it at open).
    bucket_expiry: bool = True
    #: The bucket TTL each config level stores (None: none), refreshed with its limits.
    level_ttls: dict[Hashable, int | None] = field(default_factory=dict)
    #: The idle TTL an acquire resolved per (entity, resource), for its later charges.
    bucket_ttls: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Global limits' regional shares (flows/regional_limits.SharesBook), made by the face
    #: before the first acquire; None: no global limit here, nothing read or written.
    shares: Any = None
    #: Call shapes an acquire has validated (flows/acquire.py, `_asked`).
    asked_shapes: dict[Hashable, Any] = field(default_factory=dict)

    def shard_count(self, entity_id: str, resource: str) -> int:
        meta = self.entities.get(entity_id)
        return 1 if meta is None else meta.shards.counts.get(resource, 1)

    def parent_of(self, entity_id: str, resource: str) -> str | None:
        """The parent an acquire of `resource` takes from too, as far as known."""
        meta = self.entities.get(entity_id)
        if meta is None:
            return None
        facts = meta.facts
        return facts.parent_id if facts.cascades(resource) else None

    def parent_known(self, entity_id: str) -> bool:
        """Whether this client knows the entity has a parent (without one, no resource
        cascades, and an acquire asks no more about parents)."""
        meta = self.entities.get(entity_id)
        return meta is not None and meta.facts.parent_id is not None

    def known_parents(self, entity_id: str, resources: Sequence[str]) -> list[tuple[str, str]]:
        """(parent, resource) to take from together with the entity, when it is known."""
        more = []
        if self.parent_known(entity_id):
            for r in resources:
                p = self.parent_of(entity_id, r)
                if p is not None:
                    more.append((p, r))
        return more
