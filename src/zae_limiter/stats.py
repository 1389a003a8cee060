"""Decision metrics: what acquire decided, per resource, and how long it took.

`DecisionStats` counts outcomes and keeps a latency histogram with fixed buckets; it is
thread-safe and cheap. `limiter.get_stats()` returns a frozen snapshot; listeners (such
as `zae_limiter.otel`) are told of every decision as it happens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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
    #: Admitted acquires that a soft limit would have rejected (Limit.soft): counted
    #: with `admitted` too, and here by limit name (an acquire past two counts in both).
    soft_rejected: int = 0
    soft_rejected_by_limit: Mapping[str, int] = field(default_factory=dict)

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
            soft_rejected=sum(p.soft_rejected for p in parts),
            soft_rejected_by_limit=_summed(p.soft_rejected_by_limit for p in parts),
        )


def _summed(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for name, count in part.items():
            out[name] = out.get(name, 0) + count
    return out
