"""OpenTelemetry metrics for a limiter's decisions (optional: `pip install 'zae-limiter[otel]'`).

    from zae_limiter.otel import instrument
    instrument(limiter)            # the global meter provider, or meter_provider=...

Two instruments, both with `resource` and `outcome` attributes:
- `zae_limiter.decisions` (counter): one per acquire;
- `zae_limiter.acquire.duration` (histogram, ms): how long the decision took.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from zae_limiter.lease import DecisionStats
from zae_limiter.stats import Decision

INSTALL_HINT = "pip install 'zae-limiter[otel]'"
METER_NAME = "zae_limiter"


class _HasStats(Protocol):
    @property
    def stats(self) -> DecisionStats: ...


class Instrumentation:
    """What `instrument` attached; `detach()` stops reporting."""

    def __init__(self, stats: DecisionStats, counter: Any, histogram: Any) -> None:
        self._stats = stats
        self.counter = counter
        self.histogram = histogram
        stats.add_listener(self._on_decision)

    def _on_decision(self, resource: str, outcome: Decision, latency_ms: float) -> None:
        attributes = {"resource": resource, "outcome": outcome}
        self.counter.add(1, attributes)
        self.histogram.record(latency_ms, attributes)

    def detach(self) -> None:
        self._stats.remove_listener(self._on_decision)


def _metrics_api() -> Any:
    try:
        metrics = importlib.import_module("opentelemetry.metrics")
    except ImportError as error:
        raise ImportError(
            f"zae_limiter.otel needs the OpenTelemetry API: {INSTALL_HINT}"
        ) from error
    return metrics


def instrument(limiter: _HasStats, meter_provider: Any = None) -> Instrumentation:
    """Report every decision of `limiter` (RateLimiter or SyncRateLimiter) to OpenTelemetry."""
    metrics = _metrics_api()
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    meter = provider.get_meter(METER_NAME)
    counter = meter.create_counter(
        "zae_limiter.decisions", unit="1", description="acquire decisions by outcome"
    )
    histogram = meter.create_histogram(
        "zae_limiter.acquire.duration", unit="ms", description="time to decide an acquire"
    )
    return Instrumentation(limiter.stats, counter, histogram)
