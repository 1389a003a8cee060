"""The `sessions` focus (sim/foci/sessions.py, docs/simulator.md "Focused worlds"): the
worlds it shapes, and the worlds it leaves alone. The mutants it finds are replayed at
their seeds in tests/sim/test_simulator.py."""

from __future__ import annotations

from itertools import pairwise

from zae_limiter.flows.reserves.settings import ReserveSettings
from zae_limiter.sim import focus
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.foci import sessions
from zae_limiter.sim.spec import LATE, THROTTLED, WorldSpec, draw_world


def _seeds(n: int = 16) -> list[int]:
    return [s for s in range(3000) if focus.focus_of(s) == "sessions"][:n]


def _worlds(seed: int, quotas: bool) -> tuple[WorldSpec, WorldSpec]:
    """(the world the seed draws, the world its focus makes of it)."""
    drawn = draw_world(Choices(seed), quotas=quotas)
    c = Choices(seed)
    shaped = focus.apply(draw_world(c, quotas=quotas), c, focus.focus_of(seed))
    return drawn, shaped


def test_the_focus_owns_its_band() -> None:
    assert focus.BANDS["sessions"] == (34, 40)
    assert focus.SHAPERS["sessions"] is sessions.sessions
    bands = sorted(focus.BANDS.values())
    assert all(a[1] <= b[0] for a, b in pairwise(bands)), "bands overlap"


def test_general_worlds_of_the_band_keep_their_draw() -> None:
    for seed in _seeds():
        drawn, shaped = _worlds(seed, quotas=False)
        assert shaped.focus == "sessions"
        assert (shaped.limits, shaped.clients, shaped.faults) == (
            drawn.limits, drawn.clients, drawn.faults
        )  # fmt: skip


def test_a_quota_world_becomes_a_busy_short_session() -> None:
    for seed in _seeds():
        _drawn, spec = _worlds(seed, quotas=True)
        quota = spec.limits[0]
        assert quota.window is not None and quota.window.session_ms in sessions.LENGTHS_MS
        assert 10 <= quota.capacity <= 150
        assert spec.entities == {"e1": None} and spec.skew_ms == 0
        assert 2 <= len(spec.clients) <= 4 and spec.clients[0].reserve
        assert all(not any(v > 0 for v in op.adjust.values()) for cl in spec.clients
                   for op in cl.ops), "adjustments only give back"  # fmt: skip


def test_both_families_are_drawn() -> None:
    """Hot partitions (the entity shards in a session) or a holder (a reserve tuned to
    hold a larger share, beside busier clients, under a quota about their demand)."""
    hot = holder = 0
    for seed in _seeds(40):
        _drawn, spec = _worlds(seed, quotas=True)
        first = spec.clients[0]
        if spec.faults.of(THROTTLED):
            hot += 1
            assert {cl.partition_wcu for cl in spec.clients} <= {1, 2}
            assert spec.tempo == "brisk" and spec.limits[0].capacity <= 40
        else:
            holder += 1
            assert isinstance(first.reserve, ReserveSettings) and first.reserve.max_share >= 0.25
            assert all(op.consume["rpm"] == 1 for op in first.ops)
            assert spec.tempo == "steady" and spec.limits[0].capacity >= 40
            assert not spec.faults.of(LATE)
    assert hot and holder
