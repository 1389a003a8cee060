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
from zae_limiter.sim.foci import simm3
from zae_limiter.sim.spec import WorldSpec

#: Out of 100; a focus's band [low, high) of `focus_of`'s draw.
BANDS: dict[str, tuple[int, int]] = {
    "operator": (20, 27),
    "quota-reset": (27, 34),
}

#: name -> how it reshapes a world (the world drawn for the seed, the schedule's choices).
Shaper = Callable[[WorldSpec, Choices], WorldSpec]
SHAPERS: dict[str, Shaper] = {
    "operator": simm3.operator,
    "quota-reset": simm3.quota_reset,
}


def focus_of(seed: int) -> str | None:
    """The focus a seed draws, or None (the general world)."""
    draw = random.Random(f"{seed}/focus").randrange(100)
    for name, (low, high) in BANDS.items():
        if low <= draw < high:
            return name
    return None


def apply(spec: WorldSpec, c: Choices, focus: str | None) -> WorldSpec:
    if focus is None:
        return spec
    return replace(SHAPERS[focus](spec, c), focus=focus)
