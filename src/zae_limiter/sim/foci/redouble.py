"""The "redouble" focus (sim/focus.py): an entity whose load swings, so that it shards,
is merged back while quiet, and shards again, with the aggregator interleaved and the
reads of its hot partition throttled.

What the `shards` and `merges` foci rarely draw together, and the schedules behind the
raise of a count need:

- a doubling back over a shard a merge drained (2 -> 1, then 1 -> 2 on the same entity),
  after the drained shard's freeze ran out and it refilled, while the entity is short of
  full: a raise that counted the drained shard as it stands would create the tokens it
  refilled (flows/scaling/made.py). Load comes in swings (`SWINGS`): seconds of steady
  acquires past the partition's write limit (one or two writes a second, so the write
  rate proves it hot), pauses of a few seconds (the aggregator marks the entity quiet and
  merges it), and lulls past the freeze (a drained shard refills);
- a read before a raise throttled after the good write that called for the raise, on an
  entity judged for loss: DynamoDB throttles the reads of a hot partition (with
  ThrottlingReasons, or from an endpoint that gives none), never its writes here
  (`on_reads`), the limit does not refill in half of these worlds, and no fault or
  give-back loses tokens by design (no reserves, no rollbacks, no adjustments, no
  cascades), so a take the acquire then failed shows as tokens lost;
- a merge whose read meets a shard that has not seen the last raise yet, the propagation
  landing before its transaction: the aggregator runs on batches of any size, now and
  then long after the records (it lags behind the stream), some of its writes are never
  sent (the batch comes again), and it may stall a few ms after a read
  (`stall_after_read`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zae_limiter.limits import Limit
from zae_limiter.sim import spec as kinds
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.spec import YEAR_S, FaultRates, WorldSpec, draw_op

NAME = "redouble"
#: Entities: mostly one, so every burst meets the shards of the last.
SHAPES: tuple[dict[str, str | None], ...] = (
    {"e1": None},
    {"e1": None},
    {"e1": None},
    {"e1": None, "e2": None},
)
#: Requests a throttle may strike: reads. Writes go through (a hot partition's reads
#: throttle first; the write path has other foci).
READS = frozenset({"get_item", "batch_get_item", "query"})
#: Per thousand aggregator reads, and how long it then stalls (ms).
STALL_PER_MILLE = 500
STALL_MS = (2, 5, 20, 80)


def _limit(c: Choices) -> Limit:
    """One limit in two does not refill (a loss shows); else per second (a drained shard
    refills right after its freeze, and swings run the bucket dry), or per minute."""
    kind = c.below(10)
    if kind < 5:
        return Limit.custom("rpm", c.between(60, 200), 1, YEAR_S)
    if kind < 8:
        cap = c.between(6, 20)
        return Limit.custom("rpm", cap, cap, 1)
    cap = c.between(20, 60)
    return Limit.custom("rpm", cap, cap, 60)


def redouble(spec: WorldSpec, c: Choices) -> WorldSpec:
    if spec.limits[0].window is not None:
        return spec  # quota worlds keep theirs: a merge leaves a quota alone
    refusals = c.chance(500)
    entities = dict(c.pick(SHAPES))
    spec = replace(spec, limits=(_limit(c),), entities=entities, skew_ms=0)
    clients = []
    for i in range(c.between(1, 2)):
        base = spec.clients[i] if i < len(spec.clients) else spec.clients[0]
        ops = tuple(
            replace(draw_op(c, spec.leaves, spec.limits, True), adjust={}, rollback=False)
            for _ in range(c.between(40, 80))
        )
        wcu = 1000 if refusals else c.pick([1, 2])
        clients.append(replace(base, name=f"c{i}", partition_wcu=wcu, offset_ms=0,
                               threads=c.pick([1, 1, 2]), ops=ops, reserve=False))  # fmt: skip
    rates = {kinds.THROTTLED: c.pick([80, 150, 250]), kinds.AGGREGATE: c.pick([120, 400, 1000])}
    if c.chance(500):
        rates[kinds.THROTTLED_BARE] = c.pick([30, 80])
    if c.chance(400):
        rates[kinds.UNSENT] = c.pick([20, 50])
    return replace(spec, clients=tuple(clients), faults=FaultRates(rates), tempo="swings")


def on_reads(fault: str | None, call: Any, spec: WorldSpec) -> str | None:
    """Where the write rate proves a partition hot (clients that count one or two writes a
    second), a throttle strikes its reads only: a throttle drawn for a write lets it
    through. Where refusals prove it (a partition of the default size), writes are
    refused too."""
    if fault not in (kinds.THROTTLED, kinds.THROTTLED_BARE) or call.op in READS:
        return fault
    return fault if any(cl.partition_wcu >= 1000 for cl in spec.clients) else None


def stall_after_read(world: Any, thread: Any, call: Any) -> None:
    """The aggregator stalls after a read is answered, before the write it decides (a
    slow invocation): clients and its own other writes land in between."""
    if not world.faults_on or not thread.label.startswith("aggregator"):
        return
    if call.op != "batch_get_item" or not world.c.chance(STALL_PER_MILLE):
        return
    ms = world.c.pick(STALL_MS)
    thread.client.paused_until = world.true_ms + ms
    world.trace.note(world.true_ms, f"aggregator stalls {ms} ms after its read")
