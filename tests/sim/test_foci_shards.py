"""The "merges" focus (sim/foci/shards.py): what its worlds draw, and that quota worlds of
its band keep theirs. Its mutant is found at the seed tests/sim/sim_mutants.py gives
(`test_simulator.test_the_simulator_finds_each_mutant`)."""

from __future__ import annotations

import pytest

from zae_limiter.sim import focus
from zae_limiter.sim import spec as kinds
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.foci import shards as shards_focus
from zae_limiter.sim.spec import YEAR_S, draw_world


def _seeds(name: str, count: int) -> list[int]:
    return [s for s in range(3000) if focus.focus_of(s) == name][:count]


def test_the_merges_focus_takes_the_top_of_the_shards_band() -> None:
    # Draws 12, 15, 16 and 17 keep the shards focus: seeds 7808, 9096, 8545 and 1999
    # (tests/sim/sim_mutants.py, test_simulator.py) are shards worlds.
    assert focus.BANDS["shards"] == (10, 18) and focus.BANDS["merges"] == (18, 20)
    assert {focus.focus_of(s) for s in (7808, 9096, 8545, 1999)} == {"shards"}


@pytest.mark.parametrize("seed", _seeds("merges", 5))
def test_a_merges_world_is_one_where_a_token_counted_twice_shows(seed: int) -> None:
    c = Choices(seed)
    spec = focus.apply(draw_world(c), c, focus.focus_of(seed))
    assert spec.focus == "merges" and spec.tempo == "bursty" and spec.skew_ms == 0
    assert spec.entities in shards_focus.MERGE_SHAPES
    (limit,) = spec.limits
    assert limit.refill_period_seconds == YEAR_S and 60 <= limit.capacity <= 240
    assert 1 <= len(spec.clients) <= 2
    for client in spec.clients:
        assert client.threads == 1 and client.reserve is False and client.offset_ms == 0
        assert client.partition_wcu == 1000
        assert all(not op.adjust for op in client.ops)
    assert not set(spec.faults.rates) & set(shards_focus.WIDENING)
    assert spec.faults.of(kinds.THROTTLED) == 200 and spec.faults.of(kinds.AGGREGATE) == 1000


@pytest.mark.parametrize("seed", _seeds("merges", 3))
def test_a_quota_world_of_the_band_keeps_its_world(seed: int) -> None:
    c = Choices(seed)
    drawn = draw_world(c, quotas=True)
    spec = focus.apply(drawn, c, focus.focus_of(seed))
    assert spec.limits == drawn.limits and spec.clients == drawn.clients
