"""Whether a quota's last tokens are within reach: once the world is quiet, an entity
whose shards together hold a whole token of a calendar quota (its cascade parent too)
must admit an acquire of one, by a client that remembers nothing (issue 39: a fraction
left on each of several shards, which no single take could spend, seed 2909). The
probe's take is given back at once, so the judgement after it sees the table as the
world left it."""

from __future__ import annotations

import random
from typing import Any

from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded
from zae_limiter.flows.acquire import acquire
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.offpath import read
from zae_limiter.flows.reserves.ops import compensate
from zae_limiter.flows.write.shares import current
from zae_limiter.repository import _state
from zae_limiter.sim.spec import RESOURCE
from zae_limiter.sim.world import World

MILLI = 1000


def within_reach(world: World, state: RepoState, entity: str, limit: Any, now: int) -> None:
    """Fail "a token out of reach" when the probe is refused while every level it takes
    from holds a whole token of `limit` over its live shards."""
    levels = [entity]
    parent = world.spec.entities.get(entity)
    if parent is not None:
        levels.append(parent)
    held = {e: _held(world, state, e, limit, now) for e in levels}
    if any(total < MILLI for total in held.values()):
        return
    probe = _state(state.table, state.namespace, 60, state.partition_wcu, state.max_shards, False)
    probe.rng = random.Random(f"{world.c.seed}/reach/{entity}")
    try:
        flow = acquire(probe, entity, RESOURCE, {limit.name: 1}, None, now, False)
        acquired = world.settle_all(flow)
    except RateLimitExceeded as error:
        if any(v.limit_name != limit.name for v in error.violations):
            return  # another limit refused it (one in debt refuses any take)
        shown = ", ".join(f"{e} {v / MILLI:g}" for e, v in held.items())
        world.checker.fail(
            "a token out of reach",
            f"{entity}/{limit.name}: refused one token while the shards together hold "
            f"{shown} tokens, which no acquire can take before the reset",
        )
        return
    except RateLimiterUnavailable:
        return
    world.settle_all(compensate(probe, acquired.taken, now))


def _held(world: World, state: RepoState, entity: str, limit: Any, now: int) -> int:
    """Millitokens of `limit` on the entity's live shards, less reserves' held counts (a
    shard of another config is left out: its next write rebases it)."""
    total = 0
    for shard in world.settle_all(read.read_shards(state, entity, RESOURCE)):
        if shard.shard_id >= shard.shard_count:
            continue
        seen, out, rebase = current(shard, limit, now)
        if not rebase:
            total += max(0, seen.tokens(now, shard.shard_count, out))
    return total
