"""The "shards" focus (sim/focus.py): worlds whose entities are sharded early, where the
aggregator runs often and acquires interleave with its doublings and merges.

Two ways an entity comes to be sharded, one drawn per world:

- by its write rate: clients whose partitions take one or two writes a second
  (`partition_wcu`), so busy cascades double from their own windows; a limit that
  mostly does not refill, and half of these worlds keep no fault that loses tokens by
  design, so a take lost on the way (a doubling stopped by a refusal at another level)
  shows as tokens lost;
- by refusals: partitions of the default size, throttles that name the partition (they
  prove it hot to a client without reserves), the aggregator on every few records,
  bursts between idles: entities double, go quiet, and are merged while acquires come
  back to them.

In both, the aggregator may stall between a read and the write it decides (a slow
Lambda invocation; `stall_after_read`), so that acquires land in between: a shard made
after a merge read it as unmade, a count propagated before the merge's transaction.

The "merges" focus (`merges`, its own band) narrows this to the schedule a merge's
check that unmade shards are still unmade exists for: see its docstring.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zae_limiter.limits import Limit
from zae_limiter.sim import spec as kinds
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.spec import (
    YEAR_S,
    ClientSpec,
    FaultRates,
    WorldSpec,
    as_quota,
    draw_op,
)

#: Per thousand aggregator reads, and how long the stall lasts (ms).
STALL_PER_MILLE = 700
STALL_MS = (50, 300, 1500)
#: In the "merges" focus: a read answered, then the write a few ms later (one round
#: trip and the planning), during which a burst's next acquire or two land.
MERGE_STALL_MS = (2, 5, 10, 20)
#: The foci whose aggregator may stall after a read.
STALLING = frozenset({"shards", "merges"})
#: Faults that lose tokens by design (sim/run.py LOSING).
LOSING = (kinds.LOST, kinds.LATE, kinds.CRASH, kinds.PAUSE)
#: Faults that widen the checker's allowance or reset its ideal bucket: none in the
#: "merges" focus.
WIDENING = (*LOSING, kinds.JUMP, kinds.DELETE, kinds.LIMITS, kinds.MIGRATION)
SHAPES: tuple[dict[str, str | None], ...] = (
    {"parent": None, "child": "parent"},
    {"parent": None, "c1": "parent", "c2": "parent"},
    {"e1": None, "e2": None, "e3": None},
)
#: The "merges" focus's entities: mostly one, so a burst's acquires meet the merge.
MERGE_SHAPES: tuple[dict[str, str | None], ...] = (
    {"e1": None},
    {"e1": None},
    {"e1": None, "e2": None},
    {"parent": None, "child": "parent"},
)


def _limit(c: Choices, refusals: bool) -> Limit:
    cap = c.between(8, 60)
    year = Limit.custom("rpm", cap, 1, YEAR_S)
    minute = Limit.custom("rpm", cap, cap, 60)
    second = Limit.custom("rpm", cap, cap, 1)
    return c.pick([second, minute, year] if refusals else [year, year, minute])


def _client(c: Choices, client: ClientSpec, spec: WorldSpec, refusals: bool) -> ClientSpec:
    ops = tuple(draw_op(c, spec.leaves, spec.limits, True) for _ in range(c.between(15, 40)))
    return replace(
        client,
        partition_wcu=1000 if refusals else c.pick([1, 2]),
        threads=c.between(1, 2),
        ops=ops,
        reserve=c.chance(100 if refusals else 300),
    )


def shards(spec: WorldSpec, c: Choices) -> WorldSpec:
    refusals = c.chance(500)
    entities = dict(c.pick(SHAPES[1:] if refusals else SHAPES[:2]))
    limit = _limit(c, refusals)
    if spec.limits[0].window is not None:  # a quota world stays one
        limit = as_quota(limit)
    spec = replace(spec, limits=(limit,), entities=entities)
    clients = tuple(_client(c, cl, spec, refusals) for cl in spec.clients)
    while len(clients) < 2:
        named = replace(spec.clients[0], name=f"c{len(clients)}")
        clients += (_client(c, named, spec, refusals),)
    rates = dict(spec.faults.rates)
    if refusals:
        rates[kinds.THROTTLED] = 200
        rates[kinds.AGGREGATE] = 1000
        tempo = "bursty"
    else:
        if c.chance(500):
            rates = {k: v for k, v in rates.items() if k not in LOSING}
        rates.pop(kinds.AGGREGATE, None)
        if c.chance(500):
            rates[kinds.AGGREGATE] = c.pick([80, 200])
        tempo = c.pick(["mixed", "bursty"])
    return replace(spec, clients=clients, faults=FaultRates(rates), tempo=tempo)


def merges(spec: WorldSpec, c: Choices) -> WorldSpec:
    """The "merges" focus: mostly one entity, doubled by refusals (throttles that name
    the partition), in bursts between idles, with the aggregator on every few records:
    an entity is now and then left quiet with a shard its doubling made room for and no
    acquire has made yet, and merged as the next burst starts, while the aggregator
    takes a few ms between its read and its transaction (`stall_after_read`) and the
    burst's first acquire makes that shard. One or two clients of one thread each (more
    acquires at once would write the shards the merge read, which cancels it), no
    reserves (they keep an entity from merging), a limit that does not refill, no
    adjustments, and none of the faults that widen the checker's allowance or restart
    its ideal bucket: a token counted twice shows."""
    if spec.limits[0].window is not None:
        # Quota worlds keep theirs (with the stalls): a merge leaves a quota alone.
        return spec
    entities = dict(c.pick(MERGE_SHAPES))
    limit = Limit.custom("rpm", c.between(60, 240), 1, YEAR_S)
    spec = replace(spec, limits=(limit,), entities=entities, skew_ms=0)
    clients = []
    for i in range(c.between(1, 2)):
        base = spec.clients[i] if i < len(spec.clients) else spec.clients[0]
        ops = tuple(
            replace(draw_op(c, spec.leaves, spec.limits, True), adjust={})
            for _ in range(c.between(30, 60))
        )
        clients.append(replace(base, name=f"c{i}", partition_wcu=1000, offset_ms=0,
                               threads=1, ops=ops, reserve=False))  # fmt: skip
    rates = {k: v for k, v in spec.faults.rates.items() if k not in WIDENING}
    rates[kinds.THROTTLED] = 200
    rates[kinds.AGGREGATE] = 1000
    return replace(spec, clients=tuple(clients), faults=FaultRates(rates), tempo="bursty")


def stall_after_read(world: Any, thread: Any, call: Any) -> None:
    """The aggregator stalls after a read is answered, before the write it decides: its
    process is frozen (`paused_until`) while the clients go on. Drawn only in this focus's
    worlds, so no other world's choices move."""
    if not world.faults_on or not thread.label.startswith("aggregator"):
        return
    if call.op != "batch_get_item" or not world.c.chance(STALL_PER_MILLE):
        return
    ms = world.c.pick(STALL_MS if world.spec.focus == "shards" else MERGE_STALL_MS)
    thread.client.paused_until = world.true_ms + ms
    world.trace.note(world.true_ms, f"aggregator stalls {ms} ms after its read")
