"""Worlds shaped around token reserves (sim/focus.py): a fleet of reserve holders and
what they leave on a bucket item for other clients to meet.

- `stale_reserve`: a bucket that does not refill (or slowly), sized so that a fleet of
  hot clients with large reserves nearly uses it up, beside a speculative client without
  reserves whose calls are large and at times long (it holds its image through them),
  which plans from the image its last write left; bursts between short pauses, so held
  counts expire unreturned only where every client waits (a keeper that did not run in
  time, a crash) while those images stay young enough to plan from. This is where a
  write planned from an old image must name every epoch raised since (issue 35,
  flows/write/plan.py `watched_epochs`), and where a reserve granted from a stale image
  must still leave as much again behind.
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
    BACKGROUND_KINDS,
    OPERATOR_KINDS,
    THROTTLED,
    THROTTLED_BARE,
    UNSENT,
    YEAR_S,
    ClientSpec,
    FaultRates,
    OpSpec,
    WorldSpec,
    as_quota,
)


def _op(c: Choices, leaves: list[str], limits: tuple[Limit, ...], most: int,
        give_back: int, least: int = 1) -> OpSpec:  # fmt: skip
    """An acquire of `least`..`most` of the first limit (and some of the second, if any); with
    `give_back` per thousand, its lease ends lower (an adjustment down, or a rollback)."""
    consume = {limits[0].name: c.between(least, max(least, most))}
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


#: A watcher's lease holds (ms): mostly short, at times a call of half a minute or more.
WATCHER_HOLDS_MS = (0, 5, 200, 25_000, 45_000)


#: Bursts between pauses of 2-4 s (idle reserves fall due and go back), never longer:
#: held counts expire where every client waits, as when the fleet is done and the
#: watcher's long call runs (`World.step` then lets the time pass at once, before any
#: keeper: one that did not run in time), so nothing is lost before that.
TEMPO = "bursts"


def stale_reserve(spec: WorldSpec, c: Choices) -> WorldSpec:
    entities = _entities(c)
    leaves = [e for e in entities if e not in {p for p in entities.values() if p}]
    # Mostly one holder: every write of the fleet after the watcher's image moves the
    # full-at time, which that image's bound then sees.
    fleet = 1 if c.chance(700) else 2
    watchers = 1
    # The fleet's workload first, then a bucket it nearly uses up (a daily budget): its
    # late bursts meet a bucket near empty, where a grant is half of what is left (as
    # much again stays behind), so reserves are a large part of it. A watcher's calls
    # are large (a gateway's requests of many tokens): a tenth to half of the bucket.
    sizes = [(c.between(6, 15), c.between(2, 8)) for _ in range(fleet)]
    demand = sum(count * (most + 1) // 2 for count, most in sizes)
    capacity = max(30, demand * c.between(60, 110) // 100)
    watched = [c.between(8, 20) for _ in range(watchers)]
    # Nearly never refilling, or slowly (a client refused waits minutes, not a year, and
    # comes back to a bucket near empty).
    period = c.pick([YEAR_S, 600, 3600])
    amount = 1 if period == YEAR_S else capacity
    limits = _as_drawn(spec, (Limit.custom("rpm", capacity, amount, period),))
    # Of the limit as drawn: a quota world's quota holds a third of it.
    room = limits[0].capacity
    sizes += [(count, room // 2) for count in watched]
    clients: list[ClientSpec] = []
    for i, (count, most) in enumerate(sizes):
        holder = i < fleet
        least = 1 if holder else max(1, room // 10)
        ops = tuple(_op(c, leaves, limits, most, 100, least) for _ in range(count))
        reserve = _fleet_settings(c) if holder else False
        client = _client(c, i, reserve, ops, spec, c.between(1, 2) if holder else 1)
        if not holder:
            # A watcher's calls may run long (a streamed completion): it holds its image
            # through them while the fleet takes, spends and falls quiet.
            client = replace(client, holds_ms=WATCHER_HOLDS_MS)
        clients.append(client)
    # The watchers stand anywhere among the clients (the step picks by position).
    order = list(range(len(clients)))
    for i in range(len(order) - 1, 0, -1):
        j = c.below(i + 1)
        order[i], order[j] = order[j], order[i]
    placed = tuple(replace(clients[k], name=f"c{n}") for n, k in enumerate(order))
    return replace(spec, limits=limits, entities=entities, clients=placed, tempo=TEMPO,
                   faults=_gentle(spec))  # fmt: skip


def _gentle(spec: WorldSpec) -> FaultRates:
    """The kinds the seed drew, each at the lowest rate: the schedule needs the fleet to
    hold reserves and clients to keep their images, which frequent crashes would wipe.
    No operator's changes (limits changed under a fleet is another family of risks), no
    deletion and no aggregator: what reserves held of a deleted bucket, or of a shard
    that split, widens the checker's allowance by as much as a stale image can take."""
    rates = spec.faults.rates
    kept = {
        k: min(r, 30) for k, r in rates.items() if k not in (*OPERATOR_KINDS, *BACKGROUND_KINDS)
    }
    return FaultRates(kept)


def _fleet_settings(c: Choices) -> ReserveSettings:
    """A fleet's reserve settings, as a user tunes them for a hot bucket: hot sooner,
    reserves sized for 1-4 s and allowed a larger share of the bucket (half of it two
    times in three): a few reserves carry the fleet's whole workload."""
    return ReserveSettings(
        writes_per_second=c.pick([0.5, 1.0, 0.25]),
        hot_rate=c.pick([1.0, 2.0, 4.0]),
        max_share=c.pick([0.5, 0.25, 0.5]),
    )


def give_back(spec: WorldSpec, c: Choices) -> WorldSpec:
    if c.chance(500):
        return _give_back_at_the_top(spec, c)
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


def _give_back_at_the_top(spec: WorldSpec, c: Choices) -> WorldSpec:
    """A gateway's budget that does not refill (a daily or monthly allowance), whose
    leases mostly end lower than they took (a rollback, or usage below the estimate,
    below zero at times): the bucket stays near its top while a reserve holder spends
    small amounts from its reserve, so a give-back larger than what the reserve spent
    meets a full-at time with little charged to it. No fault that loses tokens by design
    (lost answers, held requests, crashes, pauses), no operator and no aggregator: the
    checker then judges that no token was lost (`Checker.kept_all`), which a give-back
    credited to the bucket before the spending it stands for was charged breaks."""
    entities = _entities(c)
    leaves = [e for e in entities if e not in {p for p in entities.values() if p}]
    capacity = c.between(15, 60)
    limits = _as_drawn(spec, (Limit.custom("rpm", capacity, 1, YEAR_S),))
    # One process (one or two threads): another client's reserve spending, unreported
    # when a give-back lands, widens the checker's allowance by as much (`_at_top`).
    ops = tuple(_op(c, leaves, limits, 2, 650) for _ in range(c.between(15, 35)))
    reserve = _fleet_settings(c) if c.chance(500) else True
    clients = [_client(c, 0, reserve, ops, spec, c.between(1, 2))]
    rates = spec.faults.rates
    lossless = {k: r for k, r in rates.items() if k in (THROTTLED, THROTTLED_BARE, UNSENT)}
    tempo = c.pick(["bursty", "steady", "mixed"])
    return replace(spec, limits=limits, entities=entities, clients=tuple(clients), tempo=tempo,
                   faults=FaultRates(lossless))  # fmt: skip
