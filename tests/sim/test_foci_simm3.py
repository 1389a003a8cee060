"""The `operator` and `quota-reset` foci (sim/foci/simm3.py, docs/simulator.md "Focused
worlds"): the worlds they shape, and the worlds they leave alone. Each mutant they find is
replayed at its seed in tests/sim/test_simulator.py."""

from __future__ import annotations

from zae_limiter.sim import focus
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.foci import simm3
from zae_limiter.sim.spec import (
    DELETE,
    LATE,
    MIGRATION,
    TEMPOS,
    THROTTLED,
    WorldSpec,
    draw_world,
)


def _seeds(name: str, n: int = 12) -> list[int]:
    return [s for s in range(2000) if focus.focus_of(s) == name][:n]


def _worlds(seed: int, quotas: bool) -> tuple[WorldSpec, WorldSpec]:
    """(the world the seed draws, the world its focus makes of it)."""
    drawn = draw_world(Choices(seed), quotas=quotas)
    c = Choices(seed)
    shaped = focus.apply(draw_world(c, quotas=quotas), c, focus.focus_of(seed))
    return drawn, shaped


def test_each_focus_owns_its_band() -> None:
    assert focus.BANDS["operator"] == (20, 27) and focus.BANDS["quota-reset"] == (27, 34)
    assert focus.SHAPERS["operator"] is simm3.operator
    assert focus.SHAPERS["quota-reset"] is simm3.quota_reset


def test_general_worlds_of_the_quota_reset_band_keep_their_draw() -> None:
    for seed in _seeds("quota-reset"):
        drawn, shaped = _worlds(seed, quotas=False)
        assert shaped.focus == "quota-reset"
        assert (shaped.limits, shaped.clients, shaped.faults) == (
            drawn.limits, drawn.clients, drawn.faults
        )  # fmt: skip


def test_a_quota_reset_world_crosses_a_reset_on_reserves() -> None:
    for seed in _seeds("quota-reset"):
        _drawn, spec = _worlds(seed, quotas=True)
        quota = spec.limits[0]
        assert quota.window is not None and 20 <= quota.capacity <= 60
        assert spec.entities == {"e1": None} and spec.skew_ms == 0
        assert 300 <= 60_000 - spec.start_ms % 60_000 <= 3000, "the minute turns at once"
        assert spec.tempo == "brisk" and max(hi for _w, _lo, hi in TEMPOS["brisk"]) <= 500
        assert spec.clients[0].reserve and 2 <= len(spec.clients) <= 4
        assert all(not any(v > 0 for v in op.adjust.values()) for cl in spec.clients
                   for op in cl.ops), "adjustments only give back"  # fmt: skip
        assert set(spec.faults.rates) <= simm3.KEPT
        assert max(spec.faults.rates.values(), default=0) <= simm3.QUOTA_FAULT_RATE


def test_an_operator_world_migrates_with_requests_held_in_flight() -> None:
    for seed in _seeds("operator"):
        _drawn, spec = _worlds(seed, quotas=False)
        assert spec.faults.of(MIGRATION) >= 80 and spec.faults.of(LATE) >= 80


def test_an_operator_quota_world_deletes_and_never_migrates() -> None:
    for seed in _seeds("operator"):
        _drawn, spec = _worlds(seed, quotas=True)
        assert spec.faults.of(DELETE) and not spec.faults.of(MIGRATION)
        assert {cl.partition_wcu for cl in spec.clients} <= {1, 2}


def test_an_operator_quota_world_shards_one_entity_without_reserves_under_a_small_quota() -> None:
    """The deletion fence's world: one entity, sharded by throttles naming the partition,
    deleted while clients without reserves spend a quota of 10-30 (of the drawn kind)."""
    for seed in _seeds("operator"):
        drawn, spec = _worlds(seed, quotas=True)
        quota = spec.limits[0]
        assert spec.limits == (quota,) and 10 <= quota.capacity <= 30
        assert quota.window is not None and drawn.limits[0].window is not None
        assert quota.window.session_ms == drawn.limits[0].window.session_ms
        assert spec.entities == {"e1": None} and spec.skew_ms == 0 and spec.tempo == "brisk"
        assert spec.faults.of(THROTTLED) >= 80 and 2 <= len(spec.clients) <= 4
        assert not any(cl.reserve for cl in spec.clients)
        assert all(30 <= len(cl.ops) <= 60 for cl in spec.clients)
