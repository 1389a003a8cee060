"""Worlds shaped around token reserves (sim/focus.py): a fleet of reserve holders and
what they leave on a bucket item for other clients to meet.

- `stale_reserve`: a bucket that does not refill, drained by a fleet of hot clients
  with reserves, beside speculative clients without reserves that plan from the image
  their last write left; bursts between idles long enough for the fleet's held counts to
  expire unreturned (a keeper that did not run in time, a crash) while those images stay
  young enough to plan from. This is where a write planned from an old image must name
  every epoch raised since (issue 35, flows/write/plan.py `watched_epochs`), and where a
  reserve granted from a stale image must still leave as much again behind.
- `give_back`: reserve holders on refilling buckets whose leases often end below what
  they took (rollbacks, adjustments down), bursts between idles that fill the bucket up:
  where a give-back may settle in a reserve only up to what it spent of its held counts
  (flows/reserves/book.py `apply_change`).

Each draws its numbers from the schedule's choices, so a focused schedule shrinks like
any other; the kinds of faults and background work are the ones the seed drew.
"""

from __future__ import annotations

from dataclasses import replace

from zae_limiter.flows.reserves.settings import ReserveSettings
from zae_limiter.limits import Limit
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.spec import (
    OPERATOR_KINDS,
    YEAR_S,
    ClientSpec,
    FaultRates,
    OpSpec,
    WorldSpec,
    as_quota,
)


def _op(c: Choices, leaves: list[str], limits: tuple[Limit, ...], most: int,
        give_back: int) -> OpSpec:  # fmt: skip
    """An acquire of 1..`most` of the first limit (and some of the second, if any); with
    `give_back` per thousand, its lease ends lower (an adjustment down, or a rollback)."""
    consume = {limits[0].name: c.between(1, most)}
    if len(limits) > 1:
        consume[limits[1].name] = c.between(0, min(8, limits[1].capacity))
    adjust: dict[str, int] = {}
    rollback = False
    if c.chance(give_back):
        if c.chance(400):
            rollback = True
        else:
            name = c.pick([limit.name for limit in limits])
            adjust[name] = -c.between(1, 3)
    elif c.chance(150):
        adjust[c.pick([limit.name for limit in limits])] = c.between(1, 5)
    return OpSpec(c.pick(leaves), consume, adjust, rollback)


def _client(c: Choices, i: int, reserve: bool | ReserveSettings, ops: tuple[OpSpec, ...],
            spec: WorldSpec, threads: int) -> ClientSpec:  # fmt: skip
    skew = spec.skew_ms
    # A world of regions keeps its clients where the world put them (its serving ones).
    region = c.pick(sorted({cl.region for cl in spec.clients})) if spec.regions else ""
    return ClientSpec(
        name=f"c{i}",
        reserve=reserve,
        speculative=True,
        retries=c.chance(100),
        offset_ms=c.between(-skew, skew) if skew else 0,
        partition_wcu=1000,
        threads=threads,
        ops=ops,
        inline_limits=c.chance(300),
        region=region,
    )


def _as_drawn(spec: WorldSpec, limits: tuple[Limit, ...]) -> tuple[Limit, ...]:
    """A quota world (`draw_world(..., quotas=True)`) keeps its first limit a quota."""
    if spec.limits[0].window is None:
        return limits
    return (as_quota(limits[0]), *limits[1:])


def _entities(c: Choices) -> dict[str, str | None]:
    """One entity mostly (every acquire on one bucket); a child cascading to a parent
    at times (the parent's bucket is then the one drained)."""
    return {"parent": None, "child": "parent"} if c.chance(250) else {"e1": None}


def stale_reserve(spec: WorldSpec, c: Choices) -> WorldSpec:
    entities = _entities(c)
    leaves = [e for e in entities if e not in {p for p in entities.values() if p}]
    fleet = c.between(1, 2)
    # Large enough that a reserve (at most a tenth of it) holds several acquires: held
    # counts, not full-at moves, carry most of what the fleet takes; and the counts left
    # out at each lull drain it.
    capacity = c.between(60, 250)
    # Nearly never refilling, or slowly (a client refused waits minutes, not a year, and
    # comes back to a bucket near empty).
    period = c.pick([YEAR_S, 600, 3600])
    amount = 1 if period == YEAR_S else capacity
    limits = _as_drawn(spec, (Limit.custom("rpm", capacity, amount, period),))
    watchers = 1
    clients: list[ClientSpec] = []
    for i in range(fleet + watchers):
        holder = i < fleet
        count = c.between(15, 30) if holder else c.between(8, 20)
        # The fleet: many small acquires. A watcher's may be larger (a gateway's requests
        # of many tokens).
        most = c.between(2, 8) if holder else c.between(5, capacity // 4)
        ops = tuple(_op(c, leaves, limits, most, 100) for _ in range(count))
        reserve = _fleet_settings(c) if holder else False
        clients.append(_client(c, i, reserve, ops, spec, c.between(1, 2) if holder else 1))
    # The watchers stand anywhere among the clients (the step picks by position).
    order = list(range(len(clients)))
    for i in range(len(order) - 1, 0, -1):
        j = c.below(i + 1)
        order[i], order[j] = order[j], order[i]
    placed = tuple(replace(clients[k], name=f"c{n}") for n, k in enumerate(order))
    return replace(spec, limits=limits, entities=entities, clients=placed, tempo="lulls",
                   faults=_gentle(spec))  # fmt: skip


def _gentle(spec: WorldSpec) -> FaultRates:
    """The kinds the seed drew, each at the lowest rate: the schedule needs the fleet to
    hold reserves and clients to keep their images, which frequent crashes would wipe.
    No operator's changes: limits changed under a fleet is another family of risks."""
    rates = spec.faults.rates
    return FaultRates({k: min(r, 30) for k, r in rates.items() if k not in OPERATOR_KINDS})


def _fleet_settings(c: Choices) -> ReserveSettings:
    """A fleet's reserve settings, as a user tunes them for a hot bucket: hot sooner,
    reserves sized for a longer period and allowed a larger share of the bucket."""
    return ReserveSettings(
        writes_per_second=c.pick([2.0, 1.0, 0.5]),
        hot_rate=c.pick([4.0, 2.0, 1.0]),
        max_share=c.pick([0.1, 0.25, 0.5]),
    )


def give_back(spec: WorldSpec, c: Choices) -> WorldSpec:
    entities = _entities(c)
    leaves = [e for e in entities if e not in {p for p in entities.values() if p}]
    capacity = c.between(10, 60)
    period = c.pick([1, 60, 10])
    first = Limit.custom("rpm", capacity, max(1, capacity // c.pick([1, 2])), period)
    limits: tuple[Limit, ...] = (first,)
    if c.chance(300):
        second = c.between(20, 80)
        limits = (first, Limit.custom("tpm", second, second, c.pick([1, 60])))
    limits = _as_drawn(spec, limits)
    clients = []
    for i in range(c.between(1, 3)):
        ops = tuple(_op(c, leaves, limits, 5, 450) for _ in range(c.between(15, 35)))
        clients.append(_client(c, i, not c.chance(200), ops, spec, c.between(1, 2)))
    tempo = c.pick(["bursty", "steady"])
    return replace(spec, limits=limits, entities=entities, clients=tuple(clients), tempo=tempo)
