"""Two foci: an operator working beside the clients, and a calendar quota's reset met by
token reserves.

`operator`: `zae-limiter migrate` from schema 2, run again and again while requests are
held in flight (a run gives up on a step's write that DynamoDB applies later, after the
next run finished), in a third of those worlds beside an operator deleting leaf entities
that clients shard under low partition limits and throttles naming the partition. Quota
worlds draw no migration (a schema-2 item holds no quota): there the operator deletes the
one entity that clients without reserves shard and spend under a small quota
(`_deleting_quota`), so that a shard made as the deletion runs meets a quota spent again
after it (the deletion fence, `flows/records/entities.py` `delete_buckets`).

`quota-reset`: clients on reserves hammer one entity's calendar quota across its reset,
so that a reserve taken in the old window is held at the reset and the new window binds
soon after. Only worlds drawn with a calendar quota (`--quotas`) are reshaped: the
general worlds of this band keep their draw (and the seeds kept as regression tests
there keep their schedules).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from zae_limiter.limits import Limit
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.spec import (
    CRASH,
    DELETE,
    LATE,
    LOST,
    MIGRATION,
    PAUSE,
    THROTTLED,
    THROTTLED_BARE,
    UNSENT,
    ClientSpec,
    FaultRates,
    OpSpec,
    WorldSpec,
)

#: Per-thousand rates a focus draws the kinds it adds at (those of `spec.draw_faults`).
RATES = (30, 80, 200)
#: A minute (the quota worlds' reset period) in ms.
MINUTE_MS = 60_000


def operator(spec: WorldSpec, c: Choices) -> WorldSpec:
    if any(limit.window is not None for limit in spec.limits):
        return _deleting_quota(spec, c)
    spec = _migrating(spec, c)
    return _deleting(spec, c) if c.below(3) == 0 else spec


def _migrating(spec: WorldSpec, c: Choices) -> WorldSpec:
    """Migration runs beside the clients while requests are held in flight: a step's
    version write that lands after a later run finished must not put the version back."""
    rates = dict(spec.faults.rates)
    rates[MIGRATION] = c.pick(RATES[1:])
    rates[LATE] = c.pick(RATES[1:])
    return replace(spec, faults=FaultRates(rates))


def _deleting(spec: WorldSpec, c: Choices) -> WorldSpec:
    """Leaf entities deleted while clients shard them: low partition limits and throttles
    that name the partition double an entity's shards, clients know of shards nobody
    made yet, and a shard's making held in flight may land after the deletion."""
    rates = dict(spec.faults.rates)
    rates[DELETE] = c.pick(RATES[:2])
    rates[THROTTLED] = c.pick(RATES[:2])
    rates[LATE] = max(rates.get(LATE, 0), c.pick(RATES[:2]))
    clients = tuple(replace(cl, partition_wcu=c.pick([1, 2])) for cl in spec.clients)
    return replace(spec, clients=clients, faults=FaultRates(rates))


def _deleting_quota(spec: WorldSpec, c: Choices) -> WorldSpec:
    """A quota world's operator deletes the one entity that two to four clients shard
    under it (partitions of one or two writes a second, throttles naming the partition
    at 80 or 200 per thousand, the brisk tempo): a shard is made now and then just as
    the deletion runs, and the clients' 30-60 acquires each spend the quota the entity
    starts again with (10-30 of the drawn kind, calendar or session). Without reserves
    (what reserves hold at a deletion widens the checker's allowance by as much) and
    with the quota world's faults of one request or one process, at most 30 per
    thousand."""
    drawn = spec.limits[0]
    amount = c.between(10, 30)
    session = drawn.window.session_ms if drawn.window is not None else None
    if session:
        quota = Limit.quota(drawn.name, amount, reset_after=timedelta(milliseconds=session))
    else:
        quota = Limit.quota(drawn.name, amount, reset="* * * * *")
    clients = tuple(_deleting_client(c, i, quota.name) for i in range(c.between(2, 4)))
    rates = {k: min(v, QUOTA_FAULT_RATE) for k, v in spec.faults.rates.items() if k in KEPT}
    rates[DELETE] = c.pick(RATES[:2])
    rates[THROTTLED] = c.pick(RATES[1:])
    return replace(spec, limits=(quota,), entities={"e1": None}, clients=clients,
                   faults=FaultRates(rates), skew_ms=0, tempo="brisk")  # fmt: skip


def _deleting_client(c: Choices, i: int, name: str) -> ClientSpec:
    return ClientSpec(
        name=f"c{i}",
        reserve=False,
        speculative=not c.chance(150),
        retries=c.chance(200),
        offset_ms=0,
        partition_wcu=c.pick([1, 2]),
        threads=c.between(1, 2),
        ops=tuple(OpSpec("e1", {name: c.between(1, 3)}) for _ in range(c.between(30, 60))),
        inline_limits=c.chance(300),
    )


#: Faults a quota-reset world keeps, each at most `QUOTA_FAULT_RATE`: those of one
#: request or one process. No clock jumps (a skewed clock sees the boundary elsewhere,
#: which the checker allows for), no aggregator and no deletion (a split or a deletion
#: widens the checker's allowance by the reserves held then).
KEPT = frozenset({LOST, UNSENT, THROTTLED_BARE, LATE, CRASH, PAUSE})
QUOTA_FAULT_RATE = 30


def quota_reset(spec: WorldSpec, c: Choices) -> WorldSpec:
    """Two to four clients (the first on reserves, the others mostly) acquire on one
    entity under a quota of 20-60 a minute: the world starts 0.3-3 s before the minute
    turns and time passes briskly (`spec.TEMPOS`), so a hot client holds a reserve at
    the reset, and the 40-80 acquires each brings spend the new window soon after.
    Adjustments only give back (a charge with reserves out widens the allowance)."""
    # A session quota world (spec.draw_session) becomes this calendar world too.
    if not any(limit.window is not None for limit in spec.limits):
        return spec
    quota = Limit.quota(spec.limits[0].name, c.between(20, 60), reset="* * * * *")
    limits = (quota, *spec.limits[1:])
    clients = tuple(_quota_client(c, i, limits) for i in range(c.between(2, 4)))
    rates = {k: min(v, QUOTA_FAULT_RATE) for k, v in spec.faults.rates.items() if k in KEPT}
    base = spec.start_ms - spec.start_ms % MINUTE_MS
    start = base + MINUTE_MS - c.between(300, 3000)
    return replace(spec, limits=limits, entities={"e1": None}, clients=clients,
                   faults=FaultRates(rates), skew_ms=0, start_ms=start, tempo="brisk")  # fmt: skip


def _quota_client(c: Choices, i: int, limits: tuple[Limit, ...]) -> ClientSpec:
    return ClientSpec(
        name=f"c{i}",
        reserve=i == 0 or not c.chance(350),
        speculative=not c.chance(150),
        retries=c.chance(200),
        offset_ms=0,
        partition_wcu=1000,
        threads=c.between(1, 2),
        ops=tuple(_quota_op(c, limits) for _ in range(c.between(40, 80))),
        inline_limits=c.chance(300),
    )


def _quota_op(c: Choices, limits: tuple[Limit, ...]) -> OpSpec:
    first = limits[0].name
    consume = {first: c.between(1, 3)}
    if len(limits) > 1 and c.chance(500):
        consume[limits[1].name] = c.between(0, min(8, limits[1].capacity))
    adjust = {first: -c.between(1, consume[first])} if c.chance(100) else {}
    return OpSpec("e1", consume, adjust, rollback=c.chance(100))
