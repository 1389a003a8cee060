"""The types of one bucket write: what to take (`Level`), what was taken (`Taken`), why
not (`Rejected`), and the planned request (`WritePlan`). What a client remembers of the
buckets it wrote is flows/write/memory.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zae_limiter import keys
from zae_limiter.flows.context import Exhausted
from zae_limiter.flows.write.shares import stored_config as stored_config
from zae_limiter.flows.write.shares import tokens_now
from zae_limiter.limits import Limit
from zae_limiter.models import LimitStatus


@dataclass(frozen=True, slots=True)
class Level:
    """What to take from one entity's bucket."""

    entity_id: str
    resource: str
    limits: tuple[Limit, ...]
    consume_milli: Mapping[str, int]
    shard_id: int = 0
    shard_count: int = 1
    cascade: bool = False
    parent_id: str | None = None
    #: A reserve to take on top of `consume_milli` (flows/reserves/book.py), per limit.
    hold_milli: Mapping[str, int] = field(default_factory=dict)
    #: What this client's reserve of the shard spent since its last write, to report.
    flush: keys.Flush | None = None
    #: The idle seconds after which the item of a full bucket may expire (flows/write/plan.py;
    #: the level that configured it, else the default); 0: never.
    bucket_ttl_s: int = 86_400
    #: Shard k >= 1 of a session quota: the start (ms) of the session shard 0 holds open,
    #: per limit, which a take on a shard with none open joins (flows/scaling/sessions.py).
    joined: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Taken:
    entity_id: str
    resource: str
    shard_id: int
    consumed_milli: Mapping[str, int]
    limits: tuple[Limit, ...]
    #: The reserve the same write moved out, and the epoch whose held count recorded it.
    held_milli: Mapping[str, int] = field(default_factory=dict)
    epoch: int = 0
    #: Served from this client's reserve: no request was made.
    from_reserve: bool = False
    #: The write carried the level's `flush`.
    flushed: bool = False
    #: The shard as the write left it (ALL_NEW) and when: what `remaining` reads, lazily.
    after: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    at_ms: int = field(default=0, compare=False, repr=False)

    def remaining(self) -> dict[str, int] | None:
        """Whole tokens each limit had left right after this write (other clients' writes
        included), refilled to the write's time, plus what the write moved into this
        client's reserve; a shard's figure scaled to the entity by the shard count. None
        when no write was made (served from a reserve). Decodes the item: only on demand."""
        if not self.after:
            return None
        shard = keys.decode_bucket(self.after)
        count = shard.shard_count
        out: dict[str, int] = {}
        for limit in self.limits:
            left = tokens_now(shard, limit, self.at_ms) + self.held_milli.get(limit.name, 0)
            out[limit.name] = max(0, min(limit.capacity, left * count // 1000))
        return out

    def soft_over(self) -> tuple[str, ...]:
        """The soft limits this write took from that it left below zero: those that
        would have rejected it (tokens before < tokens asked, read from the write's own
        ALL_NEW, so exact under contention). Per shard, as a rejection is. Decodes the
        item only when the take has a soft limit."""
        soft = [
            limit for limit in self.limits if limit.soft and self.consumed_milli.get(limit.name)
        ]
        if not soft or not self.after:
            return ()
        shard = keys.decode_bucket(self.after)
        return tuple(limit.name for limit in soft if tokens_now(shard, limit, self.at_ms) < 0)


@dataclass(frozen=True, slots=True)
class Rejected:
    entity_id: str
    resource: str
    violations: tuple[LimitStatus, ...]
    retry_after_ms: int
    memory: Exhausted | None = None


@dataclass(frozen=True, slots=True)
class WritePlan:
    params: dict[str, Any] = field(default_factory=dict)
    #: The reserve this write takes on top of the acquire (flows/reserves/book.py), and the
    #: epoch whose held count records it.
    held_milli: Mapping[str, int] = field(default_factory=dict)
    epoch: int = 0
