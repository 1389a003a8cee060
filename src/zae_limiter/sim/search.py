"""Searching schedules: many seeds, on one core or several, bounded by a count or time.

Each seed is one schedule (`sim.run`). What a search reports: schedules run, DynamoDB
operations the engine served, faults injected by kind, and the seeds that failed with
their first violation. A failing seed is explained by `explain`: shrunk (`sim.shrink`),
then replayed with its trace on.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

from zae_limiter.sim.backends import engine_backend, regions_backend
from zae_limiter.sim.run import Outcome, run_schedule
from zae_limiter.sim.shrink import shrink
from zae_limiter.sim.spec import ALL_KINDS as KINDS

ALL_KINDS = frozenset(KINDS)
#: Seeds one worker runs before it reports (small: a search bounded in time stops soon).
CHUNK = 50


@dataclass
class Tally:
    """What a search saw."""

    schedules: int = 0
    operations: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    #: (seed, its first violation)
    failures: list[tuple[int, str]] = field(default_factory=list)
    #: CPU seconds the schedules took (all workers together).
    cpu_seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.schedules += 1
        self.operations += outcome.counts.operations
        for kind, count in outcome.counts.faults.items():
            self.faults[kind] = self.faults.get(kind, 0) + count
        if outcome.failed:
            self.failures.append((outcome.seed, str(outcome.violations[0])))

    def merge(self, other: Tally) -> None:
        self.schedules += other.schedules
        self.operations += other.operations
        self.cpu_seconds += other.cpu_seconds
        for kind, count in other.faults.items():
            self.faults[kind] = self.faults.get(kind, 0) + count
        self.failures.extend(other.failures)


@dataclass(frozen=True, slots=True)
class Worlds:
    """Which worlds a search draws: the fault kinds, quotas (each world's first limit a
    quota), and regions (each with its engine, replicated; `active`: the regions whose
    clients acquire, all of them when empty)."""

    kinds: frozenset[str] = ALL_KINDS
    quotas: bool = False
    regions: tuple[str, ...] = ()
    active: tuple[str, ...] = ()

    def run(self, seed: int, prefix: Sequence[int] | None = None, traced: bool = False) -> Outcome:
        backend = regions_backend(self.regions) if self.regions else engine_backend
        return run_schedule(
            seed, backend, prefix=prefix, traced=traced, kinds=self.kinds,
            quotas=self.quotas, regions=self.regions, active=self.active,
        )  # fmt: skip

    def again(self) -> str:
        """The options that replay a seed of these worlds on the command line."""
        out = " --quotas" if self.quotas else ""
        if self.regions:
            out += f" --regions {','.join(self.regions)}"
        if self.active:
            out += f" --active {','.join(self.active)}"
        return out


def run_seeds(seeds: Iterable[int], worlds: Worlds = Worlds()) -> Tally:
    """Run these seeds here, one after another."""
    # Lost returns and give-backs are logged as warnings by the library: expected here.
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)
    tally = Tally()
    started = time.process_time()
    for seed in seeds:
        tally.add(worlds.run(seed))
    tally.cpu_seconds = time.process_time() - started
    return tally


def search(
    start: int,
    count: int,
    *,
    jobs: int = 1,
    seconds: float | None = None,
    worlds: Worlds = Worlds(),
) -> Tally:
    """Seeds `start` .. `start + count - 1` on `jobs` processes, until done or `seconds`
    have passed (seeds not started by then are not run)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    chunks = ((s, min(CHUNK, start + count - s)) for s in range(start, start + count, CHUNK))
    if jobs <= 1:
        tally = Tally()
        for first, size in chunks:
            if deadline is not None and time.monotonic() >= deadline:
                break
            tally.merge(run_seeds(range(first, first + size), worlds))
        return tally
    return _parallel(chunks, jobs, deadline, worlds)


def _parallel(
    chunks: Iterable[tuple[int, int]], jobs: int, deadline: float | None, worlds: Worlds
) -> Tally:
    tally = Tally()
    pending: set[Future[Tally]] = set()
    todo = iter(chunks)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        while True:
            late = deadline is not None and time.monotonic() >= deadline
            while not late and len(pending) < 2 * jobs:
                chunk = next(todo, None)
                if chunk is None:
                    break
                seeds = range(chunk[0], chunk[0] + chunk[1])
                pending.add(pool.submit(run_seeds, seeds, worlds))
            if not pending:
                return tally
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                tally.merge(future.result())


def explain(seed: int, worlds: Worlds = Worlds(), budget: int = 400) -> Outcome:
    """A failing seed shrunk to a plainer schedule that fails the same way, replayed with
    its trace; a passing seed replayed with its trace."""
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)
    first = worlds.run(seed)
    if not first.failed:
        return worlds.run(seed, traced=True)
    kind = first.violations[0].kind

    def fails(prefix: Sequence[int]) -> bool:
        return any(v.kind == kind for v in worlds.run(seed, prefix=prefix).violations)

    small = shrink(first.drawn, fails, budget)
    return worlds.run(seed, prefix=small, traced=True)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def report(tally: Tally, wall_seconds: float) -> str:
    """The search's figures, as `python -m zae_limiter.sim` and the bench print them."""
    per_core = tally.operations / tally.cpu_seconds if tally.cpu_seconds else 0.0
    schedules_per_core = tally.schedules / tally.cpu_seconds if tally.cpu_seconds else 0.0
    lines = [
        f"schedules: {tally.schedules} in {wall_seconds:.1f} s "
        f"({tally.schedules / wall_seconds if wall_seconds else 0:.0f} schedules/s; "
        f"{schedules_per_core:.1f} per CPU second)",
        f"{tally.operations / wall_seconds if wall_seconds else 0:.0f} operations/s "
        f"({tally.operations} DynamoDB operations; {per_core:.0f} per CPU second with the "
        "library's own work)",
        "faults injected: "
        + (", ".join(f"{k} {v}" for k, v in sorted(tally.faults.items())) or "none"),
        f"violations: {len(tally.failures)}",
    ]
    lines.extend(f"  seed {seed}: {first}" for seed, first in tally.failures[:20])
    return "\n".join(lines)
