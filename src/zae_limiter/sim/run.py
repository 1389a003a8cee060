"""One schedule from its seed: set the world up, run it, let it settle, judge it."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zae_limiter import keys
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.offpath import read
from zae_limiter.flows.records.table import open_table
from zae_limiter.flows.scaling import throttled
from zae_limiter.flows.write.shares import capacity_of, read_shares, tokens_now
from zae_limiter.operations import Operations
from zae_limiter.repository import _state
from zae_limiter.sim.checker import Checker, Violation
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.spec import FAULT_KINDS, RESOURCE, YEAR_S, WorldSpec, draw_world
from zae_limiter.sim.threads import Counts, EngineCall
from zae_limiter.sim.trace import Trace
from zae_limiter.sim.world import World

TABLE = "sim"
#: After the workload: long enough for every held count to expire (two reserve epochs).
SETTLE_MS = 2 * keys.RESERVE_EPOCH_MS + 5_000
MAX_STEPS = 1500


@dataclass
class Backend:
    """An engine to run on: how to send it a request and how to read an item by PK."""

    call: EngineCall
    peek: Callable[[str], Mapping[str, Any] | None]


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


class _Admin:
    """What `Operations` needs of a repository, for the fault-free setup."""

    def __init__(self, state: RepoState, clock: Callable[[], int]) -> None:
        self.state = state
        self.principal = "sim"
        self.audit_retention_days: int | None = None
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock()

    def get_reserve_stats(self) -> Any:
        return None


def run_schedule(
    seed: int,
    backend_factory: Callable[[], Backend],
    prefix: Sequence[int] | None = None,
    traced: bool = False,
    kinds: frozenset[str] = frozenset(FAULT_KINDS),
    table: str = TABLE,
    quotas: bool = False,
) -> Outcome:
    # The library's own jitter draws from `random`: seeded, the schedule replays exactly.
    random.seed(seed)
    throttled._RNG.seed(seed)
    choices = Choices(seed, prefix)
    spec = draw_world(choices, kinds, quotas)
    backend = backend_factory()
    trace = Trace(spec.start_ms, backend.peek if traced else None)
    admin_state = _state(table, None, 60, 1000, 256, False)
    checker = Checker(spec.limits, admin_state.namespace, spec.start_ms, spec.skew_ms)
    world = World(spec, choices, backend.call, backend.peek, checker, trace, table)
    _setup(world, admin_state)
    world.run(MAX_STEPS)
    if not checker.violations:
        _finish(world, admin_state)
    return Outcome(seed, spec, checker.violations, world.counts, choices.drawn, trace.text())


def _setup(world: World, state: RepoState) -> None:
    ops = Operations(_Admin(state, lambda: world.true_ms))  # type: ignore[arg-type]
    world.settle_all(open_table(state, True, world.true_ms, False))
    for entity, parent in sorted(world.spec.entities.items(), key=lambda e: e[1] is not None):
        world.settle_all(ops.create_entity(entity, parent_id=parent, cascade=parent is not None))
    world.settle_all(ops.set_resource_defaults(RESOURCE, list(world.spec.limits)))


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
    return wait


def _judge(world: World, state: RepoState, recovered: bool) -> None:
    checker = world.checker
    now = world.true_ms
    for entity in world.spec.entities:
        shards = world.settle_all(read.read_shards(state, entity, RESOURCE))
        offered = world.settle_all(
            read.available(state, entity, RESOURCE, list(world.spec.limits), now)
        )
        for limit in world.spec.limits:
            checker.holds_at_most_ideal(entity, limit, offered[limit.name], now)
            if recovered and limit.refill_period_seconds != YEAR_S and limit.window is None:
                _came_back(checker, entity, limit, shards, now)


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
