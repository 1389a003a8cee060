"""The world: clients interleaved one request at a time against one engine, on true
time, in the order the schedule's choices give, with its faults.

A step is one of: deliver a request in flight (with the fault drawn for it), start an
acquire on an idle thread, let time pass, run a client's reserve keeper, crash, pause
or skew a client, or deliver a request that was held in flight past its timeout. After
the workload ends, faults stop, every request is answered, every client closes, and
the checker judges what the table offers (`finish`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zae_limiter import migrations
from zae_limiter.flows import Call, Flow, Sleep
from zae_limiter.operations import Operations
from zae_limiter.sim import background, operator
from zae_limiter.sim import spec as kinds
from zae_limiter.sim.background import Stream
from zae_limiter.sim.client import SimClient, Thread, acquire_program, keeper_program
from zae_limiter.sim.delivery import Delivery, _short
from zae_limiter.sim.spec import ClientSpec
from zae_limiter.sim.threads import Orphan


class World(Delivery):
    """The whole schedule: which step comes next, time, and the faults that strike a client."""

    #: Where the aggregator is in the table's stream (made on its first run).
    stream: Stream | None = None
    #: Whether a migration ran to its end (then no schema-2 item may be left).
    migrated: bool = False
    _strike_options: list[tuple[int, Callable[[], None]]] | None = None

    # ------------------------------------------------------------------ the loop
    def run(self, max_steps: int = 2000) -> None:
        while self.counts.steps < max_steps and not self.checker.violations:
            if not self.step():
                break
            self.counts.steps += 1
            self.checker.step = self.counts.steps

    def step(self) -> bool:
        """One step; False when the workload is over."""
        self._wake()
        threads = self._threads()
        pending = [(t, p) for t in threads for p in t.pending.values() if isinstance(p.call, Call)]
        live = self._live()
        idle = [cl for cl in live if cl.ops and self._slots(cl) > 0 and not self._paused(cl)]
        if not pending and not idle:
            if not threads and not self.orphans:  # nothing left to run
                return False
            if not self.orphans:  # all wait on time: let it pass
                self.advance(self._next_wake() - self.true_ms)
                return True
        # The options in a fixed order, weighted: the schedule's draw picks one.
        options: list[tuple[int, Callable[[], None]]] = []
        if pending:
            options.append((60, lambda: self._deliver(*self.c.pick(pending))))
        if idle:
            options.append((25, lambda: self._start(self.c.pick(idle))))
        options.append((12, self._pass_time))
        keepers = [cl for cl in live if cl.state.reserves and cl.state.reserves.busy]
        if keepers:
            options.append((5, lambda: self._keeper(self.c.pick(keepers))))
        if self.orphans:
            options.append((4, self._deliver_orphan))
        if self.replication is not None:
            options.append((10, self._replicate))
        if self.faults_on:
            options.extend(self._strikes())
        options[self.c.weighted([w for w, _ in options])][1]()
        return True

    def _strikes(self) -> list[tuple[int, Callable[[], None]]]:
        """The per-step faults this world draws, weighted, in a fixed order (the
        schedule's draws depend on it); built once, since the rates never change."""
        if self._strike_options is None:
            rates = self.spec.faults
            acts = ((kinds.CRASH, self._crash), (kinds.PAUSE, self._pause),
                    (kinds.JUMP, self._jump), (kinds.AGGREGATE, self._aggregate),
                    (kinds.DELETE, self._delete), (kinds.PARTITION, self._partition),
                    (kinds.LIMITS, self._change_limits),
                    (kinds.MIGRATION, self._migrate))  # fmt: skip
            self._strike_options = [
                (max(1, rates.of(kind) // 40), act) for kind, act in acts if rates.of(kind)
            ]
        return self._strike_options

    def _next_wake(self) -> int:
        """When the next sleeper, holder or paused client wakes (now + 1 ms if none)."""
        times = [cl.paused_until for cl in self._live() if self._paused(cl)]
        for thread in self._threads():
            if thread.wake_at is not None:
                times.append(thread.wake_at)
            times.extend(p.timeout_at for p in thread.pending.values())
        future = [t for t in times if t > self.true_ms]
        return min(future) if future else self.true_ms + 1

    def _slots(self, client: SimClient) -> int:
        return client.spec.threads - sum(1 for t in client.threads if not t.done)

    # ------------------------------------------------------------------ time
    def _start(self, client: SimClient) -> None:
        op = client.next_op()
        if op is None:
            return
        hold = self.c.pick(client.spec.holds_ms or kinds.HOLDS_MS)
        program = acquire_program(client, op, hold, _Observer(self, client))
        self._spawn(client, program, f"acquire {op.entity} {op.consume}")

    def _keeper(self, client: SimClient, everything: bool = False) -> None:
        if any(t.label.startswith("keeper") and not t.done for t in client.threads):
            return
        self._spawn(client, keeper_program(client, everything), "keeper")

    def _pass_time(self) -> None:
        # Requests in flight are answered within ms unless requests are being held in
        # flight (the LATE fault): only then may seconds pass under them and time them out.
        held = self.faults_on and self.spec.faults.of(kinds.LATE) > 0
        if not held and any(t.pending for t in self._threads()):
            self.advance(self.c.between(1, 50))
            return
        bands = kinds.TEMPOS[self.spec.tempo]
        _weight, low, high = bands[self.c.weighted([w for w, _, _ in bands])]
        self.advance(self.c.between(low, high))

    def advance(self, ms: int) -> None:
        self.true_ms += ms
        if self.tell_time is not None:
            self.tell_time(self.true_ms)
        self.trace.note(self.true_ms, f"time +{ms} ms")
        for client in self.clients:
            client.true_now = self.true_ms
        self._expired_reserves()
        for thread in self._threads():
            for index, p in list(thread.pending.items()):
                if self.true_ms >= p.timeout_at and index in thread.pending:
                    if isinstance(p.call, Sleep):
                        self._woke(thread, index)
                    else:
                        self._time_out(thread, index, p)

    def _woke(self, thread: Thread, index: int) -> None:
        """A flow's pause ends with its client's clock: the time it plans with from then
        on (the clock its next writes' sessions open with, `Delivery._sessions`)."""
        thread.run_clock = thread.client.now()
        self._answer(thread, index, thread.run_clock)

    def _expired_reserves(self) -> None:
        """Time passed beyond a reserve's return (its client's keeper did not run in
        time, as in a pause): its tokens left are lost by design, and the checker does
        not judge its entity's loss."""
        for client in self._live():
            if client.state.reserves is not None:
                for entity, _resource in client.state.reserves.unreturnable(client.now()):
                    self.checker.lossy.add(entity)

    def _wake(self) -> None:
        for client in self.clients:
            client.true_now = self.true_ms
        for thread in self._threads():
            if thread.wake_at is not None and thread.wake_at <= self.true_ms:
                thread.wake_at = None
            if thread.pending:
                for index, p in list(thread.pending.items()):
                    if isinstance(p.call, Sleep) and p.timeout_at <= self.true_ms:
                        self._woke(thread, index)
            self._advance(thread)

    # ------------------------------------------------------------------ beside the clients
    def _beside(self, spec: ClientSpec) -> SimClient | None:
        """The live process that runs `spec`'s work (started on first use; after a crash,
        the restarted one), None while it is busy or paused."""
        mine = [cl for cl in self.clients if cl.spec is spec]
        live = [cl for cl in mine if cl.alive]
        if not mine:
            live = [SimClient(spec, self.table, 0, self.spec.start_ms, self.draws)]
            live[0].true_now = self.true_ms
            self.clients.append(live[0])
        if not live:
            return None
        who = live[0]
        if self._paused(who) or any(not t.done for t in who.threads):
            return None
        return who

    def _aggregate(self) -> None:
        if self.records is None:
            return
        if self.stream is None:
            self.stream = Stream(self.records)
        pending = self.stream.pending()
        who = self._beside(background.AGGREGATOR)
        if not pending or who is None:
            return
        batch = pending[: self.c.between(1, min(len(pending), 100))]
        self.counts.fault(kinds.AGGREGATE)
        config = background.aggregator_config(self.table)
        program = background.aggregator_program(self.stream, batch, config, self.true_ms)
        self._spawn(who, program, f"aggregator on {len(batch)} records")

    def _delete(self) -> None:
        who = self._beside(background.OPERATOR)
        if who is None:
            return
        entity = self.c.pick(self.spec.leaves)
        self.counts.fault(kinds.DELETE)
        ops = Operations(background.Admin(who.state, who.now))  # type: ignore[arg-type]
        note = lambda ok: self.trace.note(  # noqa: E731
            self.true_ms, f"operator {'deleted' if ok else 'could not delete'} {entity}"
        )
        self._spawn(who, background.delete_program(ops, entity, note), f"delete {entity}")

    def _change_limits(self) -> None:
        """An operator sets or deletes stored limits (sim/operator.py)."""
        who = self._beside(background.OPERATOR)
        if who is None:
            return
        level = self.c.pick(operator.LEVELS)
        entity = self.c.pick(sorted(self.spec.entities))
        limits = operator.changed(self.c, self.spec.limits)
        self.counts.fault(kinds.LIMITS)
        # Liveness is not judged where the limits may have changed (sim/run.py `_judge`):
        # a bucket comes back to the numbers of its next write, not to the world's.
        touched = [entity] if level.startswith("entity") else list(self.spec.entities)
        self.checker.changed.update(touched)
        ops = Operations(background.Admin(who.state, who.now))  # type: ignore[arg-type]
        note = lambda text: self.trace.note(self.true_ms, text)  # noqa: E731
        program = operator.change_program(ops, level, entity, limits, note)
        self._spawn(who, program, f"limits at {level} level")

    def _migrate(self, rerun: int | None = None) -> None:
        """`zae-limiter migrate` (sim/operator.py): what the table's version needs, or
        the last `rerun` steps again (drawn unless given), which must change nothing."""
        who = self._beside(background.OPERATOR)
        if who is None:
            return
        if rerun is None:
            rerun = self.c.between(1, len(migrations.STEPS))
        self.counts.fault(kinds.MIGRATION)

        def done(again: bool, items: int) -> None:
            self.trace.note(self.true_ms, f"operator: migrated ({items} items changed)")
            self.migrated = True
            if again and items:
                self.checker.fail(
                    "migration not idempotent",
                    f"the last {rerun} steps run again changed {items} items",
                )

        program = operator.migrate_program(who.state, who.now, rerun, done)
        self._spawn(who, program, "migrate")

    def _replicate(self) -> None:
        written = self.replication.deliver(self.true_ms)
        if written:
            self.trace.note(self.true_ms, f"replicator writes {written} changes")

    def _partition(self) -> None:
        """A region is cut off from the others, or a cut-off one heals."""
        replication = self.replication
        if replication is None:
            return
        region = self.c.pick(list(self.spec.regions))
        self.counts.fault(kinds.PARTITION)
        if region in replication.partitioned:
            replication.partitioned.discard(region)
            self.trace.note(self.true_ms, f"region {region} heals")
        else:
            replication.partitioned.add(region)
            self.trace.note(self.true_ms, f"region {region} PARTITIONED")

    # ------------------------------------------------------------------ faults
    def _crash(self) -> None:
        live = self._live()
        if not live:
            return
        client = self.c.pick(live)
        self.counts.fault(kinds.CRASH)
        client.alive = False
        for thread in client.threads:
            for p in thread.pending.values():
                if isinstance(p.call, Call) and self.c.chance(500):
                    self.orphans.append(Orphan(client.name, p.call, thread.tid, p.serial,
                                               p.what, thread.run_clock))  # fmt: skip
        self.trace.note(self.true_ms, f"{client.name} CRASHES (reserves and memory lost)")
        generation = client_generation(client) + 1
        reborn = SimClient(client.spec, self.table, generation, self.spec.start_ms, self.draws)
        reborn.ops = client.ops
        reborn.true_now = self.true_ms
        self.clients.append(reborn)

    def _pause(self) -> None:
        live = [cl for cl in self._live() if not self._paused(cl)]
        if not live:
            return
        client = self.c.pick(live)
        ms = self.c.pick([500, 3000, 25_000, 50_000])
        self.counts.fault(kinds.PAUSE)
        client.paused_until = self.true_ms + ms
        self.trace.note(self.true_ms, f"{client.name} PAUSES for {ms} ms")

    def _jump(self) -> None:
        live = self._live()
        if not live or not self.spec.skew_ms:
            return
        client = self.c.pick(live)
        skew = self.spec.skew_ms
        client.offset_ms = self.c.between(-skew, skew)
        self.counts.fault(kinds.JUMP)
        self.trace.note(self.true_ms, f"{client.name} clock jumps to offset {client.offset_ms} ms")

    def settle_all(self, flow: Flow[Any], region: str = "") -> Any:
        """Run a flow to its end with no faults and no interleaving (setup, final reads),
        against `region`'s engine when the world has several."""
        send: Any = None
        while True:
            try:
                request = flow.throw(send) if isinstance(send, BaseException) else flow.send(send)
            except StopIteration as finished:
                return finished.value
            steps = request if isinstance(request, tuple) else (request,)
            results: list[Any] = []
            for step in steps:
                if isinstance(step, Sleep):
                    results.append(self.true_ms)
                    continue
                results.append(self._execute(step, None, region=region)[0])
            send = tuple(results) if isinstance(request, tuple) else results[0]


class _Observer:
    """Tells the checker what a thread's acquire and lease did, with their times."""

    def __init__(self, world: World, client: SimClient) -> None:
        self.world = world
        self.client = client
        self.limits = world.spec.limits
        #: Per bucket PK a lease end is about to change: its reserve's tokens left then.
        self._left_before: dict[str, dict[str, int] | None] = {}

    def refused(self, op: Any, error: BaseException) -> None:
        self.world.trace.note(self.world.true_ms, f"{self.client.name} refused: {_short(error)}")

    def admitted(self, acquired: Any) -> None:
        thread = self._current()
        checker = self.world.checker
        for taken in acquired.taken:
            pk = checker.bucket_pk(taken)
            served = (thread.run_started, thread.run_tick)
            at = served if taken.from_reserve else thread.applied.get(pk)
            if at is None:
                checker.fail("admitted without a write", f"{taken} (no write to {pk} applied)")
                continue
            checker.admit(taken, at, thread.run_started)
            if taken.from_reserve:
                self.world.serve(self.client.name, taken, taken.consumed_milli)
        self.world.trace.note(self.world.true_ms, f"{self.client.name} ADMITTED {_taken(acquired)}")

    def closing(self, acquired: Any, delta: dict[str, int], failed: bool) -> None:
        """The lease is about to end: what its end means to change, per bucket."""
        thread = self._current()
        for taken in acquired.taken:
            change = {n: -v for n, v in taken.consumed_milli.items()} if failed else delta
            names = {limit.name for limit in taken.limits}
            change = {n: v for n, v in change.items() if v and n in names}
            if change:
                thread.next_intents[self.world.checker.bucket_pk(taken)] = (taken, change)
                self._left_before[self.world.checker.bucket_pk(taken)] = self._left(taken)

    def _left(self, taken: Any) -> dict[str, int] | None:
        """What the client's reserve of the bucket holds now (None: no reserve there)."""
        book = self.client.state.reserves
        held = None if book is None else book.holding((taken.entity_id, taken.resource))
        if held is None or held.shard_id != taken.shard_id:
            return None
        return dict(held.left)

    def settling(self) -> None:
        """The lease's end settled what it could in the client's reserve (its first step
        ran, before any request): per bucket, the part of each change its reserve's
        tokens left moved by, counted from the run's start; the rest is what its write
        must carry (the intent's change from now on, counted when applied)."""
        thread = self._current()
        checker = self.world.checker
        intents = self.world.intents.get((thread.tid, thread.serial), {})
        for pk, intent in intents.items():
            before, after = self._left_before.pop(pk, None), self._left(intent.taken)
            settled = {}
            if before is not None and after is not None:
                for name, milli in intent.change.items():
                    part = before.get(name, 0) - after.get(name, 0)
                    if part and (part > 0) == (milli > 0) and abs(part) <= abs(milli):
                        settled[name] = part
            if after is not None:
                self.world.serve(self.client.name, intent.taken,
                                 {n: v for n, v in settled.items() if v > 0})  # fmt: skip
                mark = (self.client.name, intent.taken.entity_id, intent.taken.shard_id)
                intent.served = (mark, dict(self.world.served.get(mark, {})))
            if not settled:
                continue
            checker.change(intent.taken, settled, (intent.planned_ms, intent.tick),
                           intent.planned_ms)  # fmt: skip
            for name, milli in settled.items():
                if milli < 0:
                    checker.settled_back(intent.taken.entity_id, name, -milli)
            rest = {n: v - settled.get(n, 0) for n, v in intent.change.items()}
            intent.change = {n: v for n, v in rest.items() if v}

    def ended(self) -> None:
        """The lease's end ran: what it sent and was not applied (yet), or never sent
        (the end gave up before it), is usage the library could not record."""
        thread = self._current()
        checker = self.world.checker
        intents = self.world.intents.get((thread.tid, thread.serial), {})
        for pk, intent in list(intents.items()):
            if intent.change:
                excused = thread.serial in thread.faulted
                checker.not_recorded(intent.taken, intent.change, excused)
                continue
            del intents[pk]

    def lost(self, error: BaseException) -> None:
        self.world.trace.note(self.world.true_ms, f"{self.client.name} lease end failed: {error}")

    def _current(self) -> Thread:
        thread = self.world.running
        assert thread is not None, "the observer is told only from a running program"
        return thread


def client_generation(client: SimClient) -> int:
    _name, _, gen = client.name.partition(".")
    return int(gen) if gen else 0


def _taken(acquired: Any) -> str:
    parts = []
    for t in acquired.taken:
        amounts = ",".join(f"{n}={v // 1000}" for n, v in t.consumed_milli.items() if v)
        src = "reserve" if t.from_reserve else f"shard {t.shard_id}"
        parts.append(f"{t.entity_id}[{amounts}] from {src}")
    return "; ".join(parts)
