"""Decision metrics (stats.py) and their OpenTelemetry bridge (otel.py)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from zae_limiter.lease import DecisionStats
from zae_limiter.stats import LATENCY_BUCKETS_MS, ResourceStats


def test_outcomes_are_counted_per_resource() -> None:
    stats = DecisionStats()
    for outcome in ("admitted", "admitted", "rejected", "allowed_on_failure"):
        stats.record("gpt-4", outcome, 3.0)  # type: ignore[arg-type]
    stats.record("claude", "shadow_rejected", 0.5)
    stats.record("claude", "unavailable", 900)
    snap = stats.snapshot()
    gpt = snap.resources["gpt-4"]
    assert (gpt.admitted, gpt.rejected, gpt.allowed_on_failure, gpt.decisions) == (2, 1, 1, 4)
    claude = snap.resources["claude"]
    assert (claude.shadow_rejected, claude.unavailable, claude.admitted) == (1, 1, 0)
    total = snap.total
    assert (total.admitted, total.decisions, total.latency_sum_ms) == (2, 6, 912.5)


def test_latency_histogram_has_fixed_buckets() -> None:
    stats = DecisionStats()
    for latency in (0.2, 1.0, 1.01, 7, 5000, 5001, 60_000):
        stats.record("r", "admitted", latency)
    counts = stats.snapshot().resources["r"].latency_counts
    assert len(counts) == len(LATENCY_BUCKETS_MS) + 1
    assert counts[0] == 2  # <= 1 ms (bounds are inclusive)
    assert counts[1] == 1  # <= 2.5 ms
    assert counts[LATENCY_BUCKETS_MS.index(10)] == 1
    assert counts[LATENCY_BUCKETS_MS.index(5000)] == 1
    assert counts[-1] == 2  # over the last bound
    assert stats.snapshot().resources["r"].latency_quantile(0.5) == 10
    assert stats.snapshot().resources["r"].latency_quantile(1.0) is None
    assert ResourceStats().latency_quantile(0.5) is None


def test_snapshots_are_frozen_and_independent() -> None:
    stats = DecisionStats()
    stats.record("r", "admitted", 1)
    before = stats.snapshot()
    stats.record("r", "admitted", 1)
    assert before.resources["r"].admitted == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.resources["r"].admitted = 5  # type: ignore[misc]
    stats.reset()
    assert stats.snapshot().resources == {}


def test_listeners_hear_every_decision() -> None:
    stats = DecisionStats()
    heard: list[tuple[str, str, float]] = []

    def listener(resource: str, outcome: str, latency_ms: float) -> None:
        heard.append((resource, outcome, latency_ms))

    stats.add_listener(listener)
    stats.record("r", "rejected", 2.0)
    stats.remove_listener(listener)
    stats.record("r", "rejected", 2.0)
    assert heard == [("r", "rejected", 2.0)]


class _Limiter:
    def __init__(self) -> None:
        self.stats = DecisionStats()


def test_otel_without_the_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both names: another test (or a dependency) may have imported the submodule already.
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setitem(sys.modules, "opentelemetry.metrics", None)
    from zae_limiter.otel import instrument

    with pytest.raises(ImportError, match=r"pip install 'zae-limiter\[otel\]'"):
        instrument(_Limiter())


def test_otel_reports_decisions_through_the_sdk_meter_provider() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from zae_limiter.otel import instrument

    reader = InMemoryMetricReader()
    limiter = _Limiter()
    attached = instrument(limiter, meter_provider=MeterProvider(metric_readers=[reader]))
    limiter.stats.record("gpt-4", "admitted", 4.0)
    limiter.stats.record("gpt-4", "rejected", 6.0)
    attached.detach()
    limiter.stats.record("gpt-4", "admitted", 4.0)  # after detach: not reported
    data = reader.get_metrics_data()
    metrics = {
        metric.name: metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    counts = {
        point.attributes["outcome"]: point.value
        for point in metrics["zae_limiter.decisions"].data.data_points
    }
    assert counts == {"admitted": 1, "rejected": 1}
    durations = metrics["zae_limiter.acquire.duration"].data.data_points
    assert sorted(point.sum for point in durations) == [4.0, 6.0]
    assert {point.attributes["resource"] for point in durations} == {"gpt-4"}
