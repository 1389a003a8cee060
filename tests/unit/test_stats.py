"""Decision metrics (stats.py) and their OpenTelemetry bridge (otel.py)."""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any

import pytest

from zae_limiter.stats import LATENCY_BUCKETS_MS, DecisionStats, ResourceStats


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
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    from zae_limiter.otel import instrument

    with pytest.raises(ImportError, match=r"pip install 'zae-limiter\[otel\]'"):
        instrument(_Limiter())


class _Instrument:
    def __init__(self, name: str) -> None:
        self.name = name
        self.points: list[tuple[float, dict[str, Any]]] = []

    def add(self, value: float, attributes: dict[str, Any]) -> None:
        self.points.append((value, attributes))

    record = add


class _Meter:
    def __init__(self) -> None:
        self.instruments: dict[str, _Instrument] = {}

    def _make(self, name: str, **_: Any) -> _Instrument:
        return self.instruments.setdefault(name, _Instrument(name))

    create_counter = create_histogram = _make


def test_otel_reports_decisions_through_the_meter_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    meter = _Meter()
    provider = types.SimpleNamespace(get_meter=lambda name: meter)
    api = types.ModuleType("opentelemetry")
    metrics = types.ModuleType("opentelemetry.metrics")
    metrics.get_meter_provider = lambda: provider  # type: ignore[attr-defined]
    api.metrics = metrics  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "opentelemetry", api)
    monkeypatch.setitem(sys.modules, "opentelemetry.metrics", metrics)
    from zae_limiter.otel import instrument

    limiter = _Limiter()
    attached = instrument(limiter)
    limiter.stats.record("gpt-4", "admitted", 4.0)
    attached.detach()
    limiter.stats.record("gpt-4", "admitted", 4.0)
    attrs = {"resource": "gpt-4", "outcome": "admitted"}
    assert meter.instruments["zae_limiter.decisions"].points == [(1, attrs)]
    assert meter.instruments["zae_limiter.acquire.duration"].points == [(4.0, attrs)]
