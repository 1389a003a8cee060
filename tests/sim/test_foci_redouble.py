"""The "redouble" focus (sim/foci/redouble.py): what its worlds draw, where its throttles
strike, and that quota worlds of its band keep theirs. Its mutants are found at the seeds
tests/sim/sim_mutants.py gives (`test_simulator.test_the_simulator_finds_each_mutant`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from zae_limiter.flows import Call
from zae_limiter.sim import focus
from zae_limiter.sim import spec as kinds
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.foci import redouble
from zae_limiter.sim.foci.shards import WIDENING
from zae_limiter.sim.spec import YEAR_S, draw_world


def _seeds(count: int) -> list[int]:
    return [s for s in range(3000) if focus.focus_of(s) == "redouble"][:count]


def test_the_redouble_band_is_its_own() -> None:
    assert focus.BANDS["redouble"] == (46, 52)
    others = [band for name, band in focus.BANDS.items() if name != "redouble"]
    assert all(high <= 46 or low >= 52 for low, high in others)


@pytest.mark.parametrize("seed", _seeds(8))
def test_a_redouble_world_swings_with_nothing_that_loses_tokens(seed: int) -> None:
    c = Choices(seed)
    spec = focus.apply(draw_world(c), c, focus.focus_of(seed))
    assert spec.focus == "redouble" and spec.tempo == "swings" and spec.skew_ms == 0
    assert spec.entities in redouble.SHAPES
    (limit,) = spec.limits
    assert limit.refill_period_seconds in (YEAR_S, 1, 60)
    assert 1 <= len(spec.clients) <= 2
    wcus = {client.partition_wcu for client in spec.clients}
    assert wcus == {1000} or wcus <= {1, 2}
    for client in spec.clients:
        assert client.reserve is False and client.offset_ms == 0
        assert all(not op.adjust and not op.rollback for op in client.ops)
    assert not set(spec.faults.rates) & set(WIDENING)
    assert spec.faults.of(kinds.THROTTLED) > 0 and spec.faults.of(kinds.AGGREGATE) > 0


def test_throttles_strike_reads_only_where_the_write_rate_proves_a_partition_hot() -> None:
    c = Choices(_seeds(1)[0])
    spec = focus.apply(draw_world(c), c, "redouble")
    by_rate = replace(spec, clients=tuple(replace(cl, partition_wcu=1) for cl in spec.clients))
    by_refusals = replace(
        spec, clients=tuple(replace(cl, partition_wcu=1000) for cl in spec.clients)
    )
    read, write = Call("batch_get_item", {}), Call("update_item", {})
    for fault in (kinds.THROTTLED, kinds.THROTTLED_BARE):
        assert redouble.on_reads(fault, read, by_rate) == fault
        assert redouble.on_reads(fault, write, by_rate) is None
        assert redouble.on_reads(fault, write, by_refusals) == fault
    assert redouble.on_reads(kinds.UNSENT, write, by_rate) == kinds.UNSENT


@pytest.mark.parametrize("seed", _seeds(3))
def test_a_quota_world_of_the_band_keeps_its_world(seed: int) -> None:
    c = Choices(seed)
    drawn = draw_world(c, quotas=True)
    spec = focus.apply(drawn, c, focus.focus_of(seed))
    assert spec.limits == drawn.limits and spec.clients == drawn.clients
