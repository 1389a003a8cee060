"""A simulated client process: the library's own state (`RepoState`: caches, images,
reserves) on its own clock, and the threads that run its acquires and leases.

A thread runs a program: a generator that yields `Run`s (a flow of the library, with the
deadline and cleanup mode the faces give it) and `Hold`s (the user's code between the
acquire and the end of the lease), and is sent back what the flow returned or raised.
The programs below do what `limiter.acquire()` and the lease do, through the same
functions the faces call (`flows.acquire`, `lease._Held`): nothing here re-implements
the library's behaviour.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded
from zae_limiter.flows import Flow, Request
from zae_limiter.flows import acquire as acquire_flow
from zae_limiter.flows.acquire import Acquired, validate_amounts
from zae_limiter.flows.context import RepoState
from zae_limiter.lease import _Held
from zae_limiter.repository import _state
from zae_limiter.reserve_keeper import due_returns
from zae_limiter.sim.spec import RESOURCE, ClientSpec, OpSpec

#: What the faces give an acquire against AWS (repository.DEFAULT_TIMEOUT), in ms.
TIMEOUT_MS = 1000


@dataclass(frozen=True, slots=True)
class Run:
    """Run a flow as the runner would: `timeout_ms` bounds it (None: no deadline), and a
    run that cleans up (gives back) is never cut by it."""

    flow: Flow[Any]
    timeout_ms: int | None = TIMEOUT_MS
    cleanup: bool = False
    what: str = ""


@dataclass(frozen=True, slots=True)
class Hold:
    """The user's code runs for `ms` (true time) between the acquire and the lease's end."""

    ms: int


Program = Generator[Run | Hold, Any, None]


@dataclass
class Pending:
    """One request of a thread's round trip, sent and not answered yet."""

    index: int
    call: Any
    #: True time at which the client stops waiting for the answer.
    timeout_at: int = 0
    attempt: int = 1
    #: Which run of its thread sent it (`Thread.serial`), and what that run does.
    serial: int = 0
    what: str = ""


@dataclass
class Thread:
    """One task of a client: its program, the flow it runs and the round trip in flight."""

    client: SimClient
    tid: int
    program: Program
    flow: Flow[Any] | None = None
    run: Run | None = None
    deadline_ms: int | None = None
    cleanup: bool = False
    #: The true time the current run started (what a reserve hit is dated at).
    run_started: int = 0
    #: The engine's tick then (orders a reserve hit among the writes of its ms).
    run_tick: int = 0
    #: Its client's clock then (the `now` its writes are planned with).
    run_clock: int = 0
    request: Request | None = None
    outcomes: dict[int, Any] = field(default_factory=dict)
    pending: dict[int, Pending] = field(default_factory=dict)
    #: A Sleep or a Hold: the thread does nothing before this true time.
    wake_at: int | None = None
    #: Per bucket key (PK) of this run: when a write there was applied (true time), and
    #: whether one was attempted at all.
    applied: dict[str, tuple[int, int]] = field(default_factory=dict)
    attempted: set[str] = field(default_factory=set)
    #: The runs (`serial`) a request of which met a fault: what they could not record is
    #: excused (`Checker.not_recorded`).
    faulted: set[int] = field(default_factory=set)
    done: bool = False
    #: Counts the thread's runs: requests carry it, so a late one finds its run's intent.
    serial: int = 0
    #: What the next run means to change per bucket PK (the lease's end, see `Intent`).
    next_intents: dict[str, Any] = field(default_factory=dict)
    #: What to send the program or the flow next (None: nothing yet).
    send: Any = None
    label: str = ""

    @property
    def blocked(self) -> bool:
        return bool(self.pending)


#: The generators a world's clients share (`RepoState.rng`, `RepoState.jitter`).
Draws = tuple[random.Random, random.Random]


class SimClient:
    """One process: its library state and clock, its threads and its workload."""

    def __init__(
        self,
        spec: ClientSpec,
        table: str,
        generation: int = 0,
        seed: int = 0,
        draws: Draws | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name if generation == 0 else f"{spec.name}.{generation}"
        self.offset_ms = spec.offset_ms
        self.state: RepoState = _state(table, None, 60, spec.partition_wcu, 256, spec.reserve)
        # Every draw the client's flows make, seeded: its shard choices and waits from the
        # world's streams (`draws`), its reserve book's from its own (a string seed is
        # hashed the same way in every process, so the schedule replays alike anywhere).
        if draws is not None:
            self.state.rng, self.state.jitter = draws
        if self.state.reserves is not None:
            self.state.reserves.pacer.rng = random.Random(f"{seed}/{self.name}")
        self.threads: list[Thread] = []
        self.ops = list(spec.ops)
        self.alive = True
        self.paused_until = 0
        self.true_now = 0

    def now(self) -> int:
        """This client's clock (ms): true time plus its offset."""
        return self.true_now + self.offset_ms

    def next_op(self) -> OpSpec | None:
        return self.ops.pop(0) if self.ops else None

    def keeper_flow(self, everything: bool = False) -> Flow[None] | None:
        return due_returns(_Kept(self), everything)


class _Kept:
    """What `due_returns` needs of a repository."""

    def __init__(self, client: SimClient) -> None:
        self.state = client.state
        self.timeout = TIMEOUT_MS / 1000
        self.clock = client.now
        self._client = client

    def now_ms(self) -> int:
        return self._client.now()


@dataclass
class Admission:
    """An acquire's outcome, for the checker."""

    acquired: Acquired | None
    error: BaseException | None


def acquire_program(client: SimClient, op: OpSpec, hold_ms: int, on: Any) -> Program:
    """`with limiter.acquire(...) as lease:` with `op`'s adjustment and outcome.

    `on` is told what happened (the checker): `on.admitted(thread, acquired)` once the
    acquire returned, `on.ended(thread, acquired, delta, failed)` once the lease's end ran.
    """
    limits = None
    if client.spec.inline_limits:
        limits = on.limits
    flow = acquire_flow.acquire(
        client.state, op.entity, RESOURCE, op.consume, limits, client.now(), client.spec.speculative
    )
    try:
        acquired = yield Run(flow, what=f"acquire {op.entity} {op.consume}")
    except (RateLimitExceeded, RateLimiterUnavailable) as error:
        on.refused(op, error)
        return
    lease = _Held(acquired, validate_amounts("consume", op.consume), None)
    on.admitted(acquired)
    yield Hold(hold_ms)
    if op.adjust:
        lease._state.add(op.adjust, 1)
    delta: Mapping[str, int] = dict(lease._state.pending)
    closing = lease._closing(client.state, op.rollback, client.now)
    if closing is not None:
        on.closing(acquired, delta, op.rollback)
        try:
            yield Run(
                _noted(closing, on.settling),
                cleanup=True,
                what="rollback" if op.rollback else f"adjust {op.adjust}",
            )
        except Exception as error:  # the faces log it and go on
            on.lost(error)
        on.ended()


def _noted(flow: Flow[Any], note: Callable[[], None]) -> Flow[Any]:
    """`flow`, with `note()` called once its first step ran: a lease's end settles what
    it can in the client's reserve before its first request (`flows.reserves.ops.compensate`,
    `record_adjustments`), and no other thread runs in between."""
    try:
        request = flow.send(None)
    except StopIteration as done:
        note()
        return done.value
    note()
    while True:
        try:
            answer = yield request
        except GeneratorExit:
            flow.close()
            raise
        except BaseException as error:  # thrown in by the runner: the flow decides
            try:
                request = flow.throw(error)
            except StopIteration as done:
                return done.value
            continue
        try:
            request = flow.send(answer)
        except StopIteration as done:
            return done.value


def keeper_program(client: SimClient, everything: bool) -> Program:
    """The reserve keeper's pass: what is due (or, closing, everything) goes back."""
    flow = client.keeper_flow(everything)
    if flow is None:
        return
    try:
        yield Run(flow, cleanup=True, what="close" if everything else "keeper")
    except Exception:  # the keeper logs and goes on
        return
