"""What a schedule is made of, drawn from its choices: the limits, the entities, the
clients (their settings, clocks and workloads) and how often each fault strikes.

Everything is small on purpose: a few clients, a few acquires each, capacities of a few
tokens, so that a schedule reaches the edge of its buckets within a handful of steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import timedelta

from zae_limiter.flows.reserves.settings import ReserveSettings
from zae_limiter.limits import Limit
from zae_limiter.sim.choices import Choices

RESOURCE = "api"
#: A limit that never refills within a schedule: one token a year.
YEAR_S = 366 * 86400 - 1

#: Fault kinds, each drawn per delivery or per step (per thousand, see `FaultRates`).
LOST = "lost-answer"  # applied, the answer never reached the client
UNSENT = "unsent"  # the request never reached DynamoDB
THROTTLED = "throttled"  # refused for capacity, with ThrottlingReasons
THROTTLED_BARE = "throttled-no-reason"  # refused, from an endpoint that gives no reasons
LATE = "late"  # held in flight past the client's timeout, applied later (or never)
CRASH = "crash"  # the process dies: memory, reserves and keeper gone
PAUSE = "pause"  # the process freezes for seconds and wakes with its old images
JUMP = "clock-jump"  # the client's clock jumps within the skew bound
PARTITION = "partition"  # a region is cut off from the others, then heals (regions only)
AGGREGATE = "aggregator"  # the aggregator runs on a batch of the stream (sim/background.py)
DELETE = "entity-deleted"  # an operator deletes a leaf entity while clients acquire
LIMITS = "limits-changed"  # an operator sets or deletes stored limits while clients acquire
MIGRATION = "migration"  # `zae-limiter migrate` runs while clients acquire
FAULT_KINDS = (LOST, UNSENT, THROTTLED, THROTTLED_BARE, LATE, CRASH, PAUSE, JUMP)
#: Work beside the clients, drawn like the per-step faults (`World.step`).
BACKGROUND_KINDS = (AGGREGATE, DELETE)
#: Operators' changes, drawn apart (`draw_operator`): worlds that draw none keep the
#: schedules their seeds had before these kinds existed.
OPERATOR_KINDS = (LIMITS, MIGRATION)
#: Drawn only in worlds of several regions.
REGION_KINDS = (PARTITION,)
ALL_KINDS = (*FAULT_KINDS, *BACKGROUND_KINDS, *OPERATOR_KINDS, *REGION_KINDS)


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One acquire and its lease: what it takes, how it adjusts, whether the block fails."""

    entity: str
    consume: dict[str, int]
    adjust: dict[str, int] = field(default_factory=dict)
    rollback: bool = False


@dataclass(frozen=True, slots=True)
class ClientSpec:
    name: str
    #: Token reserves off, on with the defaults, or on with these settings.
    reserve: bool | ReserveSettings
    speculative: bool
    #: A client of the user's own with botocore's retries (the lean path off).
    retries: bool
    offset_ms: int
    partition_wcu: int
    threads: int
    ops: tuple[OpSpec, ...]
    #: Limits come with each call (`limits=`) instead of from stored config.
    inline_limits: bool
    #: The region whose engine it talks to ("": the world's only or first one).
    region: str = ""
    #: How long the user's code holds each lease (ms), one drawn per acquire; () for
    #: the world's own (`HOLDS_MS`). A focus may give a client long calls (sim/foci).
    holds_ms: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FaultRates:
    """Per thousand: per delivered request (the first five), per step (the rest)."""

    rates: dict[str, int]

    def of(self, kind: str) -> int:
        return self.rates.get(kind, 0)


@dataclass(frozen=True, slots=True)
class WorldSpec:
    limits: tuple[Limit, ...]
    #: entity -> parent (None: a top-level entity); children cascade to their parent.
    entities: dict[str, str | None]
    clients: tuple[ClientSpec, ...]
    faults: FaultRates
    #: Bound on any client's clock offset from true time (ms); skews are drawn within it.
    skew_ms: int
    start_ms: int
    #: How time passes between requests (`TEMPOS`).
    tempo: str = "mixed"
    #: Regions, each with its own engine, replicated (sim/regions.py); () for one engine.
    regions: tuple[str, ...] = ()
    #: How long a change waits before it travels to another region.
    lag_ms: int = 0
    #: The family of risks the world was shaped around (sim/focus.py); "" for none.
    focus: str = ""

    @property
    def leaves(self) -> list[str]:
        parents = {p for p in self.entities.values() if p is not None}
        return [e for e in self.entities if e not in parents]


#: How time passes when the world lets it (`World._pass_time`): weights of three bands of
#: (low ms, high ms). "mixed" is mostly milliseconds, with seconds and long idles;
#: "steady" never idles as long as a reserve's `idle_ms` (2 s), so reserves age in use
#: and are renewed; "bursty" is bursts within milliseconds between idles long enough to
#: fill buckets, expire held counts and outlive images; "brisk" (drawn only by a focus,
#: sim/foci/simm3.py) never idles past half a second, so clients stay hot across a reset.
TEMPOS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "mixed": ((70, 1, 50), (20, 100, 3000), (10, 15_000, 65_000)),
    "steady": ((60, 1, 50), (40, 100, 1500)),
    "bursty": ((85, 1, 5), (15, 20_000, 130_000)),
    "brisk": ((90, 1, 50), (10, 100, 500)),
    # Focused worlds only (sim/foci/reserves.py): bursts, pauses of 2-4 s (idle reserves
    # fall due and go back) and lulls that cross one or two reserve epochs (held counts
    # left out expire) and end within a config cache's minute (clients come back
    # planning from their images).
    "lulls": ((65, 1, 20), (20, 2_000, 4_000), (15, 21_000, 55_000)),
    # Focused worlds only (sim/foci/reserves.py): bursts between pauses of 2-4 s, never
    # longer: held counts expire only where every client waits (`World.step`).
    "bursts": ((70, 1, 20), (30, 2_000, 4_000)),
    # Focused worlds only (sim/foci/redouble.py): seconds of steady acquires, pauses of a
    # few seconds (an entity goes quiet and is merged) and lulls past a drained shard's
    # freeze (a minute), after which the load comes back.
    "swings": ((60, 5, 60), (25, 1_000, 4_000), (15, 20_000, 100_000)),
}


#: How long the user's code holds a lease (ms), drawn per acquire (`World._start`).
HOLDS_MS = (0, 0, 5, 200, 2500)


#: Session lengths a quota world may draw (ms): shorter than a schedule's idles, about a
#: reserve epoch, and a minute (a reserve's whole life).
SESSION_MS = (5_000, 20_000, 60_000)


def as_quota(limit: Limit, session_ms: int | None = None) -> Limit:
    """A calendar quota resetting every minute (worlds start within a minute's first
    20 s, so longer schedules cross a boundary), or a session quota of `session_ms`, of a
    third of the limit's capacity (at least 5, the most an acquire takes): a window that
    nothing refills is spent within a schedule's few acquires, so the reset and what
    clients do around it bind."""
    amount = max(5, limit.capacity // 3)
    if session_ms:
        return Limit.quota(limit.name, amount, reset_after=timedelta(milliseconds=session_ms))
    return Limit.quota(limit.name, amount, reset="* * * * *")


def draw_session(seed: int) -> int | None:
    """Whether a quota world's quota is a session (its length) or a calendar quota
    (None): one in two, drawn from the seed alone like `draw_operator`, so the
    schedule's stream, and every other part of the world, is the one the seed had."""
    side = random.Random(f"{seed}/session")
    return side.choice(SESSION_MS) if side.randrange(2) else None


def draw_limits(c: Choices, busy: bool) -> tuple[Limit, ...]:
    """One or two limits; a busy world's are larger (clients take reserves out of them)."""
    low, high = (60, 300) if busy else (3, 30)
    kinds = [
        lambda cap: Limit.custom("rpm", cap, 1, YEAR_S),  # does not refill
        lambda cap: Limit.custom("rpm", cap, cap, 1),  # per second
        lambda cap: Limit.custom("rpm", cap, cap, 60),  # per minute
        lambda cap: Limit.custom("rpm", cap, max(1, cap // 2), 1),  # burst twice the rate
    ]
    first = c.pick(kinds)(c.between(low, high))
    if not c.chance(400):
        return (first,)
    second = c.pick(kinds)(c.between(low + 2, 2 * high))
    return first, Limit.custom("tpm", second.capacity, second.refill_amount,
                               second.refill_period_seconds)  # fmt: skip


def draw_entities(c: Choices) -> dict[str, str | None]:
    shape = c.below(3)
    if shape == 0:
        return {"e1": None}
    if shape == 1:
        return {"parent": None, "child": "parent"}
    return {"parent": None, "c1": "parent", "c2": "parent"}


def draw_op(c: Choices, leaves: list[str], limits: tuple[Limit, ...], busy: bool) -> OpSpec:
    consume = {limits[0].name: c.between(1, 5 if busy else 3)}
    if len(limits) > 1 and not c.chance(300):
        consume[limits[1].name] = c.between(0, min(8, limits[1].capacity))
    adjust: dict[str, int] = {}
    if c.chance(250):
        name = c.pick([limit.name for limit in limits])
        adjust[name] = c.between(-3, 5)
    return OpSpec(c.pick(leaves), consume, adjust, rollback=c.chance(150))


def draw_client(c: Choices, i: int, spec_skew: int, leaves: list[str],
                limits: tuple[Limit, ...], busy: bool) -> ClientSpec:  # fmt: skip
    count = c.between(15, 40) if busy else c.between(1, 12)
    ops = tuple(draw_op(c, leaves, limits, busy) for _ in range(count))
    return ClientSpec(
        name=f"c{i}",
        reserve=not c.chance(350),
        speculative=not c.chance(150),
        retries=c.chance(200),
        offset_ms=c.between(-spec_skew, spec_skew) if spec_skew else 0,
        partition_wcu=c.pick([1000, 2, 1]),
        threads=c.between(1, 2),
        ops=ops,
        inline_limits=c.chance(300),
    )


def draw_faults(c: Choices, kinds: frozenset[str]) -> FaultRates:
    rates: dict[str, int] = {}
    for kind in FAULT_KINDS:
        if c.chance(450) and kind in kinds:
            rates[kind] = c.pick([30, 80, 200])
    return FaultRates(rates)


def draw_operator(seed: int, kinds: frozenset[str], quotas: bool = False) -> dict[str, int]:
    """How often an operator changes limits or runs a migration step. Drawn from the
    seed alone, not from the schedule's stream: a world that draws none replays the
    schedule its seed had before these kinds existed (the seeds that found each mutant,
    tests/sim/sim_mutants.py, keep theirs), and shrinking keeps the kinds a seed drew.
    Quota worlds draw none yet (a changed quota has no ideal bucket to follow)."""
    if quotas:
        return {}
    side = random.Random(f"{seed}/operator")
    rates: dict[str, int] = {}
    for kind in OPERATOR_KINDS:
        if side.randrange(1000) >= 850 and kind in kinds:
            rates[kind] = side.choice([30, 80, 200])
    return rates


def migrates_first(seed: int) -> bool:
    """Whether a world that migrates from schema 2 starts a `migrate` beside the clients'
    first acquires (an operator upgrading as traffic resumes), besides the runs drawn at
    later steps: only then does the step meet items no client converted yet. Drawn from
    the seed alone, apart from the schedule's stream, like `draw_operator`."""
    return random.Random(f"{seed}/migrate-first").randrange(2) == 0


def draw_world(
    c: Choices,
    kinds: frozenset[str] = frozenset(ALL_KINDS),
    quotas: bool = False,
    regions: tuple[str, ...] = (),
    active: tuple[str, ...] = (),
) -> WorldSpec:
    """A world; `kinds` are the fault kinds it may draw (all of them by default). One
    world in three is busy: larger limits, and clients acquiring often enough to take
    token reserves and bring the bucket to its edge with them. With `quotas` the first
    limit is a quota (`as_quota`: calendar or session, `draw_session`), drawing nothing
    more from the stream: a seed's world is otherwise the one it always was."""
    busy = c.chance(333)
    limits = draw_limits(c, busy)
    if quotas:
        limits = (as_quota(limits[0], draw_session(c.seed)), *limits[1:])
    entities = draw_entities(c)
    skew = c.pick([0, 0, 5, 50]) if JUMP in kinds else 0
    faults = draw_faults(c, kinds)
    leaves = [e for e in entities if e not in {p for p in entities.values() if p}]
    clients = tuple(draw_client(c, i, skew, leaves, limits, busy) for i in range(c.between(1, 4)))
    # Anywhere in a reserve epoch (20 s): schedules cross epoch boundaries at every phase.
    start = 1_767_225_600_000 + c.below(20_000)
    tempo = ("mixed", "mixed", "steady", "bursty")[c.below(4)]
    rates = dict(faults.rates)
    for kind in BACKGROUND_KINDS:
        if c.chance(400) and kind in kinds:
            rates[kind] = c.pick([30, 80, 200])
    rates.update(draw_operator(c.seed, kinds, quotas))
    if not regions:
        return WorldSpec(limits, entities, clients, FaultRates(rates), skew, start, tempo)
    # Several regions: drawn after everything else, so a seed's world is otherwise the
    # one it is with one region.
    serving = list(active or regions)  # the regions whose clients acquire
    clients = tuple(replace(cl, region=c.pick(serving)) for cl in clients)
    lag = c.pick([0, 200, 1000, 5000])
    if c.chance(500) and PARTITION in kinds:
        rates[PARTITION] = c.pick([30, 80, 200])
    return WorldSpec(limits, entities, clients, FaultRates(rates), skew, start, tempo,
                     regions, lag)  # fmt: skip
