"""One schedule from its seed: set the world up, run it, let it settle, judge it."""

from __future__ import annotations

import functools
import gc
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from zae_limiter import keys
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.offpath import read
from zae_limiter.flows.records.table import open_table
from zae_limiter.flows.records.version import write_version
from zae_limiter.flows.write.shares import capacity_of, read_shares, tokens_now
from zae_limiter.operations import Operations
from zae_limiter.repository import _state
from zae_limiter.sim import focus, operator
from zae_limiter.sim.background import Admin, aggregator_config
from zae_limiter.sim.checker import Checker, Violation
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.reach import within_reach
from zae_limiter.sim.regions import Replication
from zae_limiter.sim.spec import (
    AGGREGATE,
    ALL_KINDS,
    CRASH,
    LATE,
    LOST,
    MIGRATION,
    PAUSE,
    RESOURCE,
    YEAR_S,
    WorldSpec,
    draw_world,
    migrates_first,
)
from zae_limiter.sim.threads import Counts, EngineCall
from zae_limiter.sim.trace import Trace
from zae_limiter.sim.world import World

P = ParamSpec("P")
R = TypeVar("R")
TABLE = "sim"
#: After the workload: long enough for every held count to expire (two reserve epochs).
SETTLE_MS = 2 * keys.RESERVE_EPOCH_MS + 5_000
MAX_STEPS = 1500


@dataclass
class Backend:
    """An engine to run on: how to send it a request and how to read an item by PK."""

    call: EngineCall
    peek: Callable[[str], Mapping[str, Any] | None]
    #: The table's stream records so far (None: none to read; the aggregator then idles).
    records: Callable[[], Sequence[Any]] | None = None
    #: Tells the engine the true time (it dates stream records).
    tell_time: Callable[[int], None] | None = None
    #: Several regions: each one's engine, and the replicator between them.
    engines: Mapping[str, EngineCall] | None = None
    peeks: Mapping[str, Callable[[str], Mapping[str, Any] | None]] | None = None
    replication: Replication | None = None


@dataclass
class Outcome:
    seed: int
    spec: WorldSpec
    violations: list[Violation]
    counts: Counts
    drawn: list[int]
    trace: str

    @property
    def failed(self) -> bool:
        return bool(self.violations)


#: Schedules between full collections (each collects its own young garbage after it).
FULL_COLLECT_EVERY = 200
_since_full = 0


def _collector_paused(run: Callable[P, R]) -> Callable[P, R]:
    """Run with the cyclic garbage collector paused: a schedule allocates millions of
    short-lived objects and keeps thousands alive, and the collector's passes over them
    were a quarter of the search's CPU time. What the schedule left is collected after
    it (the young generations; the whole heap every `FULL_COLLECT_EVERY` schedules), so
    memory stays bounded. Nothing a schedule does depends on when garbage is collected
    (the digests of seeds 0..1,999 and 3,000..3,999 are the same either way)."""

    @functools.wraps(run)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        global _since_full
        enabled = gc.isenabled()
        gc.disable()
        try:
            return run(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
            _since_full += 1
            if _since_full >= FULL_COLLECT_EVERY:
                _since_full = 0
                gc.collect()
            else:
                gc.collect(1)

    return paused


@_collector_paused
def run_schedule(
    seed: int,
    backend_factory: Callable[[], Backend],
    prefix: Sequence[int] | None = None,
    traced: bool = False,
    kinds: frozenset[str] = frozenset(ALL_KINDS),
    table: str = TABLE,
    quotas: bool = False,
    regions: tuple[str, ...] = (),
    active: tuple[str, ...] = (),
) -> Outcome:
    choices = Choices(seed, prefix)
    spec = focus.apply(
        draw_world(choices, kinds, quotas, regions, active), choices, focus.focus_of(seed)
    )
    backend = backend_factory()
    if regions and (backend.engines is None or set(backend.engines) != set(regions)):
        raise ValueError(f"a world of regions {regions} needs a backend with those engines")
    trace = Trace(spec.start_ms, backend.peek if traced else None)
    admin_state = _state(table, None, 60, 1000, 256, False)
    checker = Checker(spec.limits, admin_state.namespace, spec.start_ms, spec.skew_ms)
    world = World(spec, choices, backend.call, backend.peek, checker, trace, table,
                  backend.records, backend.tell_time)  # fmt: skip
    world.engines = dict(backend.engines or {})
    world.peeks = dict(backend.peeks or {})
    world.replication = backend.replication
    if world.replication is not None:
        world.replication.lag_ms = spec.lag_ms
    if backend.tell_time is not None:
        backend.tell_time(spec.start_ms)
    admin_state.rng, admin_state.jitter = world.draws  # the operator's draws: the world's
    _setup(world, admin_state)
    world.run(MAX_STEPS)
    if not checker.violations:
        _finish(world, admin_state)
    return Outcome(seed, spec, checker.violations, world.counts, choices.drawn, trace.text())


def _setup(world: World, state: RepoState) -> None:
    ops = Operations(Admin(state, lambda: world.true_ms))  # type: ignore[arg-type]
    for region in world.spec.regions[1:]:  # a global table: a replica in every region
        world.settle_all(open_table(state, True, world.true_ms, False), region)
    world.settle_all(open_table(state, True, world.true_ms, False))
    for entity, parent in sorted(world.spec.entities.items(), key=lambda e: e[1] is not None):
        world.settle_all(ops.create_entity(entity, parent_id=parent, cascade=parent is not None))
    world.settle_all(ops.set_resource_defaults(RESOURCE, list(world.spec.limits)))
    _legacy(world, state)
    if world.replication is not None:
        world.replication.settle(world.true_ms)


def _legacy(world: World, state: RepoState) -> None:
    """A world that migrates starts as a table at schema 2: its version record says so,
    and each entity's shard 0 is a schema-2 item holding half of each limit (the ideal
    bucket is charged the other half)."""
    spec = world.spec
    if not spec.faults.of(MIGRATION) or any(limit.window for limit in spec.limits):
        return
    world.settle_all(write_version(state, 2, "0.1.0", world.true_ms, "sim"))
    for entity in sorted(spec.entities):
        item = operator.legacy_bucket(state.namespace, entity, spec.limits, world.true_ms)
        world.settle_all(operator.put(state.table, item))
        for limit in spec.limits:
            world.checker.spent_before(entity, limit, operator.spent(limit))
    if migrates_first(world.c.seed):
        world._migrate(rerun=1)


def _finish(world: World, state: RepoState) -> None:
    """Faults stop; every request is answered, every client closes; then what the table
    offers is judged against the ideal buckets, now and once it had time to recover."""
    world.faults_on = False
    for client in world.clients:
        client.ops = []
    _quiesce(world)
    for client in world._live():
        world._keeper(client, everything=True)
    _quiesce(world)
    if world.replication is not None:  # every region ends with the same items
        world.replication.settle(world.true_ms)
        differ = world.replication.differing()
        if differ:
            world.checker.fail("replicas differ", f"{len(differ)} items, e.g. {differ[0]}")
    if world.migrated:
        left = world.settle_all(operator.left_behind(state.table, state.namespace))
        if left:
            world.checker.fail("migration left items behind", ", ".join(left[:3]))
    _judge(world, state, recovered=False)
    world.advance(SETTLE_MS + _recovery_ms(world))
    _judge(world, state, recovered=True)


def _quiesce(world: World) -> None:
    for _ in range(MAX_STEPS):
        if not world.step():
            return
    world.checker.fail("no quiescence", f"requests still in flight after {MAX_STEPS} steps")


def _recovery_ms(world: World) -> int:
    """Until every refilling level's ideal bucket is full again (its debt included), and
    one more refill of the whole capacity: the table may hold takes the ideal bucket never
    saw (an answer lost after the write applied), which time refills as well."""
    wait = 0
    for entity in world.spec.entities:
        for limit in world.spec.limits:
            if limit.refill_period_seconds == YEAR_S or limit.window is not None:
                continue  # nothing comes back with time (a quota: not before its reset)
            ideal, _worst, _allowed = world.checker.replay((entity, limit.name))
            short = ideal.capacity - ideal.level(world.true_ms) + ideal.capacity
            wait = max(wait, math.ceil(short / ideal.per_ms))
            if world.counts.faults.get(AGGREGATE):
                # A shard a merge drained is empty for the aggregator's freeze, then
                # refills; a doubling that counts it again before then brings it back no
                # sooner (docs/aggregator.md, "Merging"; seed 7990).
                refill = math.ceil(ideal.capacity / ideal.per_ms)
                wait = max(wait, aggregator_config(TABLE).freeze_ms + refill)
    return wait


#: Faults that lose tokens by design (docs/reserves.md): a schedule with none is judged
#: for loss as well (`Checker.kept_all`).
LOSING = frozenset({LOST, LATE, CRASH, PAUSE})


def _judge(world: World, state: RepoState, recovered: bool) -> None:
    checker = world.checker
    now = world.true_ms
    lossless = not recovered and not LOSING & set(world.counts.faults)
    _tokens_at(world, state, recovered, now)
    for entity in world.spec.entities:
        shards = world.settle_all(read.read_shards(state, entity, RESOURCE))
        offered = world.settle_all(
            read.available(state, entity, RESOURCE, list(world.spec.limits), now)
        )
        for limit in world.spec.limits:
            checker.holds_at_most_ideal(entity, limit, offered[limit.name], now)
            if lossless and limit.refill_period_seconds == YEAR_S:
                checker.kept_all(entity, limit, _kept(shards, limit, now), now)
            # A client whose clock disagrees about the window cannot move a fraction
            # (its write names another window): judged on worlds without skew.
            # Nor is a move judged that was refused or unanswered (`Checker.unmoved`).
            calendar = limit.window is not None and limit.window.cron is not None
            calendar = calendar and entity not in checker.unmoved
            if lossless and calendar and not world.spec.skew_ms:
                _whole_off_shard0(checker, entity, limit, shards, now)
            # A changed limit comes back to the numbers its next write brings, which
            # the world's limits (read here) need not be.
            changed = entity in checker.changed
            if recovered and limit.refill_period_seconds != YEAR_S and limit.window is None \
                    and not changed:  # fmt: skip
                _came_back(checker, entity, limit, shards, now)


def _tokens_at(world: World, state: RepoState, recovered: bool, now: int) -> None:
    """First, every calendar quota's last tokens are within reach (sim/reach.py), where
    the limits are the world's (an operator's change is followed by the next write)."""
    if recovered:
        return
    for entity in world.spec.entities:
        for limit in world.spec.limits:
            calendar = limit.window is not None and limit.window.cron is not None
            if calendar and entity not in world.checker.changed:
                within_reach(world, state, entity, limit, now)


def _kept(shards: Any, limit: Any, now: int) -> int:
    """Millitokens the table holds for a limit, and its held counts (reserves out); a
    bucket with no item is full."""
    if not shards:
        return int(limit.capacity) * 1000
    kept = 0
    for shard, shares in read_shares(shards):
        kept += tokens_now(shard, limit, now, shares)
        kept += sum(v for v in shard.reserved.get(limit.name, {}).values() if v > 0)
    return kept


def _whole_off_shard0(checker: Checker, entity: str, limit: Any, shards: Any, now: int) -> None:
    """A calendar quota's tokens stay within reach of whole-token acquires: a split
    sends its fractions of a token to shard 0 (flows/scaling/fractions.py), so no other
    shard holds one, or the window admits less than its quota (nothing refills them).
    Judged where a shard's share is whole tokens: a quota not divisible by the shard
    count leaves each shard a fraction of its room (docs/quotas.md, "Not yet")."""
    for shard in shards:
        whole = capacity_of(limit, shard.shard_count) % 1000 == 0
        part = tokens_now(shard, limit, now) % 1000 if shard.shard_id and whole else 0
        if part:
            checker.fail(
                "a token out of reach",
                f"{entity}/{limit.name}: shard {shard.shard_id} holds {part} millitokens "
                "beyond whole tokens, which no acquire can take before the reset",
            )


def _came_back(checker: Checker, entity: str, limit: Any, shards: Any, now: int) -> None:
    """Liveness: once faults stopped and every held count expired, a refilling bucket is
    full again but for the counts of reserves nobody returned (crashed clients, returns
    whose answer was lost), which the next write to their shard charges."""
    have = lost = room = 0
    for shard, shares in read_shares(shards):
        have += tokens_now(shard, limit, now, shares)
        lost += keys.lost_milli(shard.reserved.get(limit.name, {}), now)
        room += capacity_of(limit, shard.shard_count, shares)
    if not shards:
        return
    if have + lost != room:
        checker.fail(
            "capacity did not come back",
            f"{entity}/{limit.name}: {have / 1000:g} tokens + {lost / 1000:g} in expired "
            f"held counts, of {room / 1000:g}",
        )
