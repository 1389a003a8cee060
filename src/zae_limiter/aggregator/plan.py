"""The aggregator's value types: its configuration and the writes a batch asks for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.records import Change, validate_windows
from zae_limiter.flows import Call
from zae_limiter.models import UsageSnapshot

DEFAULT_WINDOWS: tuple[str, ...] = ("hourly", "daily", "monthly")


@dataclass(frozen=True, slots=True)
class AggregatorConfig:
    """What the aggregator does. Thresholds are fractions of a partition's write limit."""

    table: str
    windows: tuple[str, ...] = DEFAULT_WINDOWS
    #: Snapshots expire (TTL) this long after their window ends.
    retention_days: int = 90
    #: Double `shard_count` when a shard's write rate passes this share of `b_wcu_cp`.
    shard_up: float = 0.8
    #: Halve it when every shard stayed under this share for `merge_quiet_ms` (0: never).
    shard_down: float = 0.2
    merge_quiet_ms: int = 600_000
    max_shard_count: int = 64
    #: A drained shard's `rf` is set this far ahead, so a stale client cannot refill it.
    freeze_ms: int = 60_000

    def __post_init__(self) -> None:
        validate_windows(self.windows)
        if not 0 < self.shard_down < self.shard_up / 2:
            raise ValueError("shard_down must be positive and under half of shard_up")
        if not 1 <= self.max_shard_count <= 100:
            raise ValueError("max_shard_count must be between 1 and 100 (one transaction)")


@dataclass(frozen=True, slots=True)
class UsageWrite:
    """One snapshot's share of a batch: the bucket changes it adds up."""

    ns: str
    entity_id: str
    resource: str
    window: str
    window_start: str
    expires_at_s: int
    parts: tuple[Change, ...]

    def snapshot(self) -> UsageSnapshot:
        """The batch's contribution (counters in millitokens)."""
        counters: dict[str, int] = {}
        events = 0
        for change in self.parts:
            for name, delta in change.deltas.items():
                counters[name] = counters.get(name, 0) + delta
            events += change.consumed
        return UsageSnapshot(
            self.entity_id, self.resource, self.window, self.window_start, counters, events
        )

    def fences(self) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for change in self.parts:
            first, last = out.get(change.shard_id, (change.seq, change.seq))
            out[change.shard_id] = (min(first, change.seq), max(last, change.seq))
        return out

    def params(self, table: str) -> dict[str, Any]:
        return keys.usage_update(table, self.ns, self.snapshot(), self.fences(), self.expires_at_s)

    def without(self, counted: Mapping[int, int]) -> UsageWrite | None:
        """What is left once changes at or below each shard's fence are dropped."""
        left = tuple(c for c in self.parts if c.seq > counted.get(c.shard_id, -1))
        return replace(self, parts=left) if left else None

    @property
    def sequence_numbers(self) -> tuple[str, ...]:
        return tuple(c.sequence_number for c in self.parts)


@dataclass(frozen=True, slots=True)
class Write:
    """One request, and the records whose effect it carries (reported if it fails)."""

    kind: str
    call: Call
    sequence_numbers: tuple[str, ...]
    usage: UsageWrite | None = None
    #: A count raise: the bucket (ns, entity, resource) and the count it raises, sent
    #: only once every shard below that count is made (flows/scaling/made.py).
    raises: tuple[str, str, str, int] | None = None


@dataclass(frozen=True, slots=True)
class MergeCandidate:
    ns: str
    entity_id: str
    resource: str
    shard_count: int
    sequence_number: str


@dataclass(slots=True)
class StreamPlan:
    writes: list[Write] = field(default_factory=list)
    merges: list[MergeCandidate] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    changes: int = 0
    skipped: int = 0

    def by_kind(self, kind: str) -> list[Write]:
        return [w for w in self.writes if w.kind == kind]
