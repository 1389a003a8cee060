"""The world's machinery: threads that run the library's flows one request at a time.

A thread runs its program (`sim.client`) until it waits on a request, a sleep or the
user's code; the world answers its requests (`sim.delivery`) and wakes it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import CALL_TIMEOUT, RateLimiterUnavailable
from zae_limiter.flows import Call, Sleep
from zae_limiter.sim.checker import Checker
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.client import (
    TIMEOUT_MS,
    Draws,
    Hold,
    Pending,
    Run,
    SimClient,
    Thread,
)
from zae_limiter.sim.spec import WorldSpec
from zae_limiter.sim.trace import Trace

EngineCall = Callable[[str, dict[str, Any]], dict[str, Any]]
#: Attempts a retrying client (botocore's standard mode) makes of one request.
BOTOCORE_ATTEMPTS = 3
WRITES = frozenset({"update_item", "put_item", "delete_item", "transact_write_items",
                    "batch_write_item"})  # fmt: skip


@dataclass
class _Raised:
    """A flow or a run that raised: thrown into the program, not sent."""

    error: BaseException


@dataclass
class Orphan:
    """A request held in flight past its client's timeout: applied later, or never."""

    client: str
    call: Call
    #: The thread and run that sent it, and what that run does.
    tid: int = 0
    serial: int = 0
    what: str = ""
    #: Its run's clock when the run started (`Thread.run_clock`).
    clock: int | None = None


@dataclass
class Intent:
    """What a lease's end means to change in one bucket (PK), told to the checker when a
    write of that run to it applies, however late."""

    taken: Any
    change: dict[str, int]
    planned_ms: int
    #: The engine's tick when the run started (a change settled in a reserve is then).
    tick: int = 0
    #: (its client's reserve of the bucket, what that reserve had served when the end
    #: settled what it could there; `Delivery._intended`); None: no reserve there.
    served: tuple[tuple[str, str, int], dict[str, int]] | None = None


@dataclass
class Counts:
    steps: int = 0
    operations: int = 0
    faults: dict[str, int] = field(default_factory=dict)

    def fault(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1


class Machine:
    """The state every part of the world shares, and its threads."""

    def __init__(
        self,
        spec: WorldSpec,
        choices: Choices,
        engine: EngineCall,
        peek: Callable[[str], Any],
        checker: Checker,
        trace: Trace,
        table: str,
        records: Callable[[], Any] | None = None,
        tell_time: Callable[[int], None] | None = None,
    ) -> None:
        #: The table's stream records so far (None: the backend has no stream), and how
        #: the engine learns the time (to date its stream records).
        self.records = records
        self.tell_time = tell_time
        #: Several regions: each one's engine and reader, and the replicator between them.
        self.engines: dict[str, EngineCall] = {}
        self.peeks: dict[str, Callable[[str], Any]] = {}
        self.replication: Any = None
        self.spec = spec
        self.c = choices
        self.engine = engine
        self.peek = peek
        self.checker = checker
        self.trace = trace
        self.table = table
        self.true_ms = spec.start_ms
        #: The library's draws in this world (shard choices; waits), one stream each for
        #: every client, seeded by the run's seed: the schedule replays exactly.
        self.draws: Draws = (random.Random(choices.seed), random.Random(choices.seed))
        self.clients = [SimClient(s, table, 0, spec.start_ms, self.draws) for s in spec.clients]
        self.orphans: list[Orphan] = []
        self.counts = Counts()
        self.faults_on = True
        self._tid = 0
        #: The thread whose program is running (the checker's observer asks).
        self.running: Thread | None = None
        #: Requests the engine has served: orders the checker's events within one ms.
        self.tick = 0
        #: (thread, entity): the last request of that thread to the entity's shard 0 met
        #: a fault (`Delivery._unmoved`).
        self.shard0_faults: set[tuple[int, str]] = set()
        #: Per level (entity, limit): the numbers each bucket shard stores, and those
        #: the ideal bucket follows (`Delivery._configs`).
        self.stored: dict[tuple[str, str], dict[int, Any]] = {}
        self.following: dict[tuple[str, str], Any] = {}
        #: Lease ends not applied yet: (thread, run) -> PK -> intent.
        self.intents: dict[tuple[int, int], dict[str, Intent]] = {}
        #: The world's session quotas (`Delivery._sessions` has nothing to do without).
        self._session_limits = tuple(
            limit for limit in spec.limits if limit.window is not None and limit.window.session_ms
        )
        #: (client, entity, shard) -> per limit, all its reserve of that shard served.
        self.served: dict[tuple[str, str, int], dict[str, int]] = {}

    def serve(self, client: str, taken: Any, milli: Mapping[str, int]) -> None:
        """A client's reserve of `taken`'s shard served `milli` (an acquire, or an
        adjustment up settled there)."""
        served = self.served.setdefault((client, taken.entity_id, taken.shard_id), {})
        for name, value in milli.items():
            served[name] = served.get(name, 0) + value

    # ------------------------------------------------------------------ threads
    def _threads(self) -> list[Thread]:
        return [t for cl in self.clients if cl.alive for t in cl.threads if not t.done]

    def _live(self) -> list[SimClient]:
        return [cl for cl in self.clients if cl.alive]

    def _paused(self, client: SimClient) -> bool:
        return client.paused_until > self.true_ms

    def _spawn(self, client: SimClient, program: Any, label: str) -> Thread:
        self._tid += 1
        thread = Thread(client, self._tid, program, label=label)
        client.threads.append(thread)
        self.trace.note(self.true_ms, f"{client.name}/{thread.tid} starts {label}")
        self._advance(thread)
        return thread

    def _advance(self, thread: Thread) -> None:
        """Run the thread's program and flow until they wait on a request or on time."""
        client = thread.client
        if thread.done or thread.pending or thread.wake_at is not None:
            return
        if not client.alive or self._paused(client):
            return
        while True:
            if thread.flow is None:
                if not self._program_step(thread):
                    return
                continue
            request = self._flow_step(thread)
            if request is None:
                continue
            if self._issue(thread, request):
                return

    def _program_step(self, thread: Thread) -> bool:
        """The program's next Run or Hold; False when it waits or ended."""
        send, thread.send = thread.send, None
        self.running = thread
        try:
            if isinstance(send, _Raised):
                item = thread.program.throw(send.error)
            else:
                item = thread.program.send(send)
        except StopIteration:
            thread.done = True
            return False
        finally:
            self.running = None
        if isinstance(item, Hold):
            thread.wake_at = self.true_ms + item.ms
            return False
        assert isinstance(item, Run)
        thread.flow, thread.run = item.flow, item
        thread.cleanup = item.cleanup
        thread.deadline_ms = None if item.timeout_ms is None else self.true_ms + item.timeout_ms
        thread.run_started = self.true_ms
        thread.run_tick = self.tick
        thread.run_clock = self.true_ms + thread.client.offset_ms
        thread.applied.clear()
        thread.attempted.clear()
        thread.serial += 1
        if thread.next_intents:
            intents = {
                pk: Intent(t, ch, self.true_ms, self.tick)
                for pk, (t, ch) in thread.next_intents.items()
            }
            self.intents[(thread.tid, thread.serial)] = intents
            thread.next_intents = {}
        return True

    def _flow_step(self, thread: Thread) -> Any:
        """The flow's next request; None when it finished (its value is sent on)."""
        assert thread.flow is not None
        send, thread.send = thread.send, None
        self.running = thread
        try:
            if isinstance(send, BaseException):
                request = thread.flow.throw(send)
            else:
                request = thread.flow.send(send)
        except StopIteration as finished:
            thread.flow, thread.send = None, finished.value
            return None
        except Exception as error:
            thread.flow, thread.send = None, _Raised(error)
            return None
        finally:
            self.running = None
        return request

    def _issue(self, thread: Thread, request: Any) -> bool:
        """Send a round trip (True: the thread now waits), or answer it at once."""
        steps = request if isinstance(request, tuple) else (request,)
        late = thread.deadline_ms is not None and self.true_ms >= thread.deadline_ms
        if late and not thread.cleanup:
            thread.cleanup = True
            cut = [_unavailable("the call's deadline passed", CALL_TIMEOUT) for _ in steps]
            thread.send = tuple(cut) if isinstance(request, tuple) else cut[0]
            return False
        thread.request = request
        thread.outcomes = {}
        timeout_at = self.true_ms + TIMEOUT_MS
        if thread.deadline_ms is not None and not thread.cleanup:
            timeout_at = min(timeout_at, thread.deadline_ms)
        for i, step in enumerate(steps):
            if isinstance(step, Sleep):
                # The runner sleeps at most until the deadline, then answers its clock.
                until = self.true_ms + step.ms
                if thread.deadline_ms is not None and not thread.cleanup:
                    until = min(until, max(self.true_ms, thread.deadline_ms))
                thread.pending[i] = Pending(i, step, timeout_at=until)
            else:
                thread.pending[i] = Pending(
                    i, step, timeout_at=timeout_at, serial=thread.serial, what=_what(thread)
                )
                key = _pk(step)
                if key is not None and step.op in WRITES:
                    thread.attempted.add(key)
        return True

    def _answer(self, thread: Thread, index: int, outcome: Any) -> None:
        thread.pending.pop(index, None)
        thread.outcomes[index] = outcome
        if thread.pending:
            return
        results = [thread.outcomes[i] for i in sorted(thread.outcomes)]
        if any(isinstance(r, Exception) for r in results):
            thread.cleanup = True
        thread.send = tuple(results) if isinstance(thread.request, tuple) else results[0]
        thread.request = None
        self._advance(thread)

    # ------------------------------------------------------------------ records
    def _record(self, thread: Thread | None, call: Call, what: str, fault: str | None,
                before: Any = None, key: str | None = None) -> None:  # fmt: skip
        if fault is not None:
            self.counts.fault(fault)
        who = "-" if thread is None else f"{thread.client.name}/{thread.tid}"
        self.trace.request(self.true_ms, who, call, what, before, key)


def _pk(call: Call) -> str | None:
    key = call.params.get("Key") or (call.params.get("Item") if call.op == "put_item" else None)
    if not isinstance(key, dict):
        return None
    pk = key.get(keys.PK)
    return str(pk["S"]) if isinstance(pk, dict) and "S" in pk else None


def _unavailable(message: str, code: str) -> RateLimiterUnavailable:
    return RateLimiterUnavailable(message, code=code)


def _what(thread: Thread) -> str:
    return "" if thread.run is None else thread.run.what
