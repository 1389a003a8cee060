"""Decision metrics: what acquire decided, per resource, and how long it took.

`DecisionStats` counts outcomes and keeps a latency histogram with fixed buckets; it is
thread-safe and cheap. `limiter.get_stats()` returns a frozen snapshot; listeners (such
as `zae_limiter.otel`) are told of every decision as it happens.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Decision = Literal[
    "admitted", "rejected", "allowed_on_failure", "shadow_rejected", "unavailable", "bypassed"
]
OUTCOMES: tuple[Decision, ...] = (
    "admitted",
    "rejected",
    "allowed_on_failure",
    "shadow_rejected",
    "unavailable",
    "bypassed",
)
#: Upper bounds (ms, inclusive) of the latency buckets; one more bucket holds the rest.
LATENCY_BUCKETS_MS: tuple[float, ...] = (
    1,
    2.5,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    2500,
    5000,
)
Listener = Callable[[str, Decision, float], None]


@dataclass(frozen=True, slots=True)
class ResourceStats:
    """Decisions on one resource. `latency_counts[i]` counts acquires that took at most
    `LATENCY_BUCKETS_MS[i]` ms (and more than the bound before); the last, the rest."""

    admitted: int = 0
    rejected: int = 0
    allowed_on_failure: int = 0
    shadow_rejected: int = 0
    unavailable: int = 0
    #: Acquires of an entity with a bypass (Entity.bypass): admitted, nothing taken.
    bypassed: int = 0
    latency_counts: tuple[int, ...] = (0,) * (len(LATENCY_BUCKETS_MS) + 1)
    latency_sum_ms: float = 0.0

    @property
    def decisions(self) -> int:
        return sum(self.latency_counts)

    def latency_quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding quantile `q` (None: no data, or overflow)."""
        total = self.decisions
        if not total:
            return None
        seen = 0
        for bound, count in zip(LATENCY_BUCKETS_MS, self.latency_counts, strict=False):
            seen += count
            if seen >= q * total:
                return bound
        return None


@dataclass(frozen=True, slots=True)
class LimiterStats:
    """A snapshot of every resource's decisions, and their sum."""

    resources: Mapping[str, ResourceStats] = field(default_factory=dict)

    @property
    def total(self) -> ResourceStats:
        parts = list(self.resources.values())
        counts = [
            sum(p.latency_counts[i] for p in parts) for i in range(len(LATENCY_BUCKETS_MS) + 1)
        ]
        return ResourceStats(
            admitted=sum(p.admitted for p in parts),
            rejected=sum(p.rejected for p in parts),
            allowed_on_failure=sum(p.allowed_on_failure for p in parts),
            shadow_rejected=sum(p.shadow_rejected for p in parts),
            unavailable=sum(p.unavailable for p in parts),
            bypassed=sum(p.bypassed for p in parts),
            latency_counts=tuple(counts),
            latency_sum_ms=sum(p.latency_sum_ms for p in parts),
        )


class _Counters:
    __slots__ = ("latency", "latency_sum", "outcomes")

    def __init__(self) -> None:
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self.latency = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.latency_sum = 0.0

    def freeze(self) -> ResourceStats:
        return ResourceStats(
            **self.outcomes,
            latency_counts=tuple(self.latency),
            latency_sum_ms=self.latency_sum,
        )


class DecisionStats:
    """Counters per resource; `record` is called once per acquire."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_resource: dict[str, _Counters] = {}
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def record(self, resource: str, outcome: Decision, latency_ms: float) -> None:
        with self._lock:
            counters = self._by_resource.get(resource)
            if counters is None:
                counters = self._by_resource[resource] = _Counters()
            counters.outcomes[outcome] += 1
            counters.latency[bisect.bisect_left(LATENCY_BUCKETS_MS, latency_ms)] += 1
            counters.latency_sum += latency_ms
        for listener in list(self._listeners):
            listener(resource, outcome, latency_ms)

    def snapshot(self) -> LimiterStats:
        with self._lock:
            return LimiterStats({r: c.freeze() for r, c in self._by_resource.items()})

    def reset(self) -> None:
        with self._lock:
            self._by_resource.clear()
