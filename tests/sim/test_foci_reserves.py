"""The focused worlds around token reserves (sim/foci/reserves.py): what each draws, that
it replays alike and shrinks like any other schedule, and that seeds outside its band
keep the world they always had."""

from __future__ import annotations

import logging

import pytest

from zae_limiter.flows.reserves.settings import ReserveSettings
from zae_limiter.sim import focus
from zae_limiter.sim.backends import engine_backend
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.foci.reserves import WATCHER_HOLDS_MS
from zae_limiter.sim.run import run_schedule
from zae_limiter.sim.spec import (
    BACKGROUND_KINDS,
    OPERATOR_KINDS,
    THROTTLED,
    THROTTLED_BARE,
    UNSENT,
    YEAR_S,
    draw_world,
)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)


def _seeds(name: str, count: int) -> list[int]:
    return [s for s in range(2000) if focus.focus_of(s) == name][:count]


def test_each_focus_owns_its_band_of_seeds() -> None:
    drawn = {focus.focus_of(s) for s in range(2000)}
    assert {"stale-reserve", "give-back"} <= drawn
    assert focus.BANDS["stale-reserve"] == (0, 6) and focus.BANDS["give-back"] == (6, 10)


@pytest.mark.parametrize("seed", _seeds("stale-reserve", 5))
def test_a_stale_reserve_world_has_a_fleet_and_watchers(seed: int) -> None:
    spec = run_schedule(seed, engine_backend).spec
    assert spec.focus == "stale-reserve" and spec.tempo == "bursts"
    (limit,) = spec.limits
    assert limit.refill_period_seconds in (YEAR_S, 600, 3600)
    fleet = [cl for cl in spec.clients if isinstance(cl.reserve, ReserveSettings)]
    watchers = [cl for cl in spec.clients if cl.reserve is False]
    assert 1 <= len(fleet) <= 2 and len(watchers) == 1
    assert all(cl.speculative for cl in spec.clients)
    assert not set(spec.faults.rates) & {*OPERATOR_KINDS, *BACKGROUND_KINDS}
    assert all(rate <= 30 for rate in spec.faults.rates.values())
    # A bucket the fleet nearly uses up (60-110% of what it asks for at most)...
    asked = sum(sum(op.consume.values()) for cl in fleet for op in cl.ops)
    assert 30 <= limit.capacity <= 8 * 15 * 2 * 1.1
    assert asked <= 4 * limit.capacity  # never a small share of it
    # ...and a watcher with large calls, at times long ones (it keeps its image).
    (watcher,) = watchers
    assert all(op.consume[limit.name] >= max(1, limit.capacity // 10) for op in watcher.ops)
    assert all(op.consume[limit.name] <= max(1, limit.capacity // 2) for op in watcher.ops)
    assert watcher.holds_ms == WATCHER_HOLDS_MS and max(watcher.holds_ms) >= 2 * 20_000
    assert all(cl.holds_ms == () for cl in fleet)


@pytest.mark.parametrize("seed", _seeds("give-back", 8))
def test_a_give_back_world_ends_leases_lower(seed: int) -> None:
    spec = run_schedule(seed, engine_backend).spec
    assert spec.focus == "give-back"
    if spec.limits[0].refill_period_seconds == YEAR_S:  # at the top of a budget
        (process,) = spec.clients
        assert process.reserve and 15 <= spec.limits[0].capacity <= 60
        assert all(sum(op.consume.values()) <= 2 for op in process.ops)
        # No fault that loses tokens by design: the checker judges the loss.
        assert set(spec.faults.rates) <= {THROTTLED, THROTTLED_BARE, UNSENT}
    else:
        assert spec.tempo in ("bursty", "steady")
        assert all(limit.refill_period_seconds in (1, 10, 60) for limit in spec.limits[:1])
    ops = [op for cl in spec.clients for op in cl.ops]
    lower = [op for op in ops if op.rollback or any(v < 0 for v in op.adjust.values())]
    assert len(lower) * 5 >= len(ops)  # 45% drawn (65% at the top): a fifth at the least


def test_the_give_back_focus_draws_both_shapes() -> None:
    tops = {
        run_schedule(seed, engine_backend).spec.limits[0].refill_period_seconds == YEAR_S
        for seed in _seeds("give-back", 8)
    }
    assert tops == {True, False}


def test_a_seed_outside_every_band_keeps_its_world() -> None:
    seed = next(s for s in range(100) if focus.focus_of(s) is None)
    drawn = draw_world(Choices(seed))
    assert run_schedule(seed, engine_backend).spec == drawn
    assert all(cl.holds_ms == () for cl in drawn.clients)  # the world's own holds


def test_a_focused_seed_replays_alike_from_its_stream() -> None:
    seed = _seeds("stale-reserve", 1)[0]
    first = run_schedule(seed, engine_backend, traced=True)
    again = run_schedule(seed, engine_backend, prefix=first.drawn, traced=True)
    assert again.trace == first.trace and again.spec == first.spec


def test_quota_worlds_keep_their_quota_in_focus() -> None:
    for name in ("stale-reserve", "give-back"):
        spec = run_schedule(_seeds(name, 1)[0], engine_backend, quotas=True).spec
        assert spec.limits[0].window is not None
