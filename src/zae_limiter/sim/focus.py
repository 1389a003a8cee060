"""Focused worlds (swarm testing): a share of the seeds draws a world shaped around one
family of risks instead of the general draw, so that schedules which need several rare
things at once (a client waking with an old image after held counts expired; an acquire
making a shard between a merge's read and its transaction) come up within thousands of
seeds rather than millions.

A seed's focus is drawn from the seed alone, apart from the schedule's stream (like
`spec.draw_operator`): a seed whose draw falls outside every band keeps the world it
always had, and each focus owns its band, so adding one moves no other focus's seeds.
A focus reshapes the world drawn for the seed (`apply`), drawing what it adds from the
schedule's choices, so that shrinking still works on it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

from zae_limiter.sim.choices import Choices
from zae_limiter.sim.foci import redouble, reserves, sessions, simm3
from zae_limiter.sim.foci.shards import merges, shards
from zae_limiter.sim.spec import WorldSpec

#: Out of 100; a focus's band [low, high) of `focus_of`'s draw.
BANDS: dict[str, tuple[int, int]] = {
    "shards": (10, 18),  # sim/foci/shards.py
    "merges": (18, 20),  # sim/foci/shards.py
    "operator": (20, 27),
    "quota-reset": (27, 34),
    "stale-reserve": (0, 6),
    "give-back": (6, 10),
    "sessions": (34, 40),  # sim/foci/sessions.py
    "redouble": (46, 52),  # sim/foci/redouble.py
}

#: name -> how it reshapes a world (the world drawn for the seed, the schedule's choices).
Shaper = Callable[[WorldSpec, Choices], WorldSpec]
SHAPERS: dict[str, Shaper] = {
    "shards": shards,
    "merges": merges,
    "operator": simm3.operator,
    "quota-reset": simm3.quota_reset,
    "stale-reserve": reserves.stale_reserve,
    "give-back": reserves.give_back,
    "sessions": sessions.sessions,
    "redouble": redouble.redouble,
}


#: Seeds the suite replays as regressions (tests/sim/sim_mutants.py FIRST_FAILING, the
#: seeds of tests/sim/test_simulator.py) keep the world each was found in, whatever band
#: their draw falls in.
KEPT = frozenset(
    {0, 4, 16, 18, 29, 72, 74, 77, 92, 463, 534, 551, 903, 1065, 1288, 1418, 1547, 1728,
     2909, 2917, 3208, 3746, 4330, 4661, 4869, 5427, 5740, 6522, 7990, 8069, 10367, 12166, 12877,
     13104, 13701}
)  # fmt: skip


def focus_of(seed: int) -> str | None:
    """The focus a seed draws, or None (the general world)."""
    if seed in KEPT:
        return None
    draw = random.Random(f"{seed}/focus").randrange(100)
    for name, (low, high) in BANDS.items():
        if low <= draw < high:
            return name
    return None


def apply(spec: WorldSpec, c: Choices, focus: str | None) -> WorldSpec:
    if focus is None:
        return spec
    return replace(SHAPERS[focus](spec, c), focus=focus)
