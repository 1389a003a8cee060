"""A schedule runs with the cyclic garbage collector paused (sim/run.py), and leaves the
collector as it found it; what it does does not depend on when garbage is collected."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from zae_limiter.sim.backends import engine_backend
from zae_limiter.sim.run import Backend, run_schedule


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_paused_during_a_schedule_and_restored_after(
    collector_on: None,
) -> None:
    seen: list[bool] = []

    def backend() -> Backend:
        seen.append(gc.isenabled())
        return engine_backend()

    run_schedule(5, backend)
    assert seen == [False]
    assert gc.isenabled()
    gc.disable()
    try:
        run_schedule(5, engine_backend)
        assert not gc.isenabled(), "a caller's paused collector stays paused"
    finally:
        gc.enable()


def test_a_schedule_is_the_same_whenever_garbage_is_collected(collector_on: None) -> None:
    paused = run_schedule(31, engine_backend)
    # Collect as often as the collector can: after every few allocations.
    threshold = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    try:
        eager = run_schedule.__wrapped__(31, engine_backend)  # type: ignore[attr-defined]
    finally:
        gc.set_threshold(*threshold)
    assert eager.drawn == paused.drawn
    assert eager.counts == paused.counts
    assert [str(v) for v in eager.violations] == [str(v) for v in paused.violations]
