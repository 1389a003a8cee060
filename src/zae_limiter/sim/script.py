"""Directed schedules: a world driven step by step by a script instead of a seed.

The schedules the search draws are random; some a reader wants to see run exactly as
written, such as issue 35's stale image (tests/sim/test_stale_image.py). `Script` runs the
same clients, engine and checker as the search, with no faults unless the script makes
them: each acquire runs to its end before the next line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from zae_limiter.flows import Call
from zae_limiter.limits import Limit
from zae_limiter.repository import _state
from zae_limiter.sim.checker import Checker
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.client import SimClient, acquire_program
from zae_limiter.sim.run import TABLE, Backend, _setup
from zae_limiter.sim.spec import ClientSpec, FaultRates, OpSpec, WorldSpec
from zae_limiter.sim.trace import Trace
from zae_limiter.sim.world import World, _Observer

START_MS = 1_767_225_600_000


def client(name: str, *, reserve: bool) -> ClientSpec:
    """A process with the library's defaults (speculative writes, its own client)."""
    return ClientSpec(name, reserve, True, False, 0, 1000, 1, (), False)


class Script:
    """A world of these clients on one entity `e1` with these limits, set up and ready."""

    def __init__(
        self,
        backend: Callable[[], Backend],
        limits: Sequence[Limit],
        clients: Sequence[ClientSpec],
        table: str = TABLE,
    ) -> None:
        spec = WorldSpec(tuple(limits), {"e1": None}, tuple(clients), FaultRates({}), 0, START_MS)
        made = backend()
        admin = _state(table, None, 60, 1000, 256, False)
        self.checker = Checker(spec.limits, admin.namespace, spec.start_ms, 0)
        self.trace = Trace(spec.start_ms, made.peek)
        self.world = World(
            spec, Choices(0, ()), made.call, made.peek, self.checker, self.trace, table
        )
        self.world.faults_on = False
        admin.rng, admin.jitter = self.world.draws
        _setup(self.world, admin)
        self.clients = {c.name: c for c in self.world.clients}

    def acquire(self, name: str, amounts: dict[str, int]) -> None:
        """One acquire (and its lease's end) by this client, to its end."""
        who: SimClient = self.clients[name]
        program = acquire_program(who, OpSpec("e1", amounts), 0, _Observer(self.world, who))
        self.world._spawn(who, program, f"acquire {amounts}")
        self._drain()

    def keeper(self, name: str, everything: bool = False) -> None:
        """The client's keeper returns what is due (everything: what `close()` returns)."""
        self.world._keeper(self.clients[name], everything)
        self._drain()

    def advance(self, ms: int) -> None:
        self.world.advance(ms)
        self.world._wake()
        self._drain()

    def crash(self, name: str) -> None:
        """The process dies: its memory and reserves are gone, nothing goes back."""
        self.clients[name].alive = False

    def admitted(self, limit: str) -> int:
        return self.checker.admitted.get(("e1", limit), 0) // 1000

    def _drain(self) -> None:
        for _ in range(1000):
            pending = [
                (t, p)
                for t in self.world._threads()
                for p in t.pending.values()
                if isinstance(p.call, Call)
            ]
            if not pending:
                self.world._wake()
                if not any(t.pending or t.wake_at for t in self.world._threads()):
                    return
                self.world.advance(1)
                continue
            self.world._deliver(*pending[0])
            self.world._wake()
