"""A paced, multi-process load on one entity, for benchmarks and load tests.

`worker(spec, ...)` is the body of one spawned client process: `spec.threads` threads,
each with its own `SyncRepository` (its own client and caches), share `spec.rate`
acquires per second on a fixed schedule and tally what happened, per second.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded
from zae_limiter.limits import Limit

RESOURCE = "api"
#: An attempt later than this behind its schedule is dropped (a caller would have given up).
MAX_LATENESS_S = 1.0


@dataclass(frozen=True, slots=True)
class Phase:
    """One run: who is offered what, with which limit, sharded or not."""

    name: str
    entity: str
    seconds: float
    rate: float
    limit: Limit
    partition_wcu: int
    pinned: bool
    #: Token reserves in the clients: None keeps the library's default; False measures
    #: sharding alone (one write per acquire).
    reserve: bool | None = None
    #: One client (repository) per process, shared by its threads, as a server process
    #: would; False: one per thread.
    shared_client: bool = False
    #: Threads per process (0: enough for RATE_PER_THREAD each, see bench.hot_entity).
    threads: int = 0


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    endpoint_url: str
    table: str
    phase: Phase
    rate: float
    threads: int
    start_at: float


@dataclass(slots=True)
class Tally:
    """What one client thread saw: counts per second since the start, and admissions."""

    attempted: dict[int, int] = field(default_factory=dict)
    admitted: dict[int, int] = field(default_factory=dict)
    rejected: dict[int, int] = field(default_factory=dict)
    unavailable: dict[int, int] = field(default_factory=dict)
    missed: int = 0
    first_attempt: float = math.inf
    admitted_at: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unavailable_codes: dict[str, int] = field(default_factory=dict)
    #: Throttles the clients saw, and reserve returns they scheduled again, per second.
    client_throttles: dict[int, int] = field(default_factory=dict)
    returns_retried: dict[int, int] = field(default_factory=dict)
    #: How long each admitted acquire took (s).
    admitted_latency: list[float] = field(default_factory=list)

    def add(self, column: dict[int, int], second: int) -> None:
        column[second] = column.get(second, 0) + 1

    def merge(self, other: Tally) -> None:
        for name in (
            "attempted",
            "admitted",
            "rejected",
            "unavailable",
            "client_throttles",
            "returns_retried",
        ):
            mine: dict[int, int] = getattr(self, name)
            for second, n in getattr(other, name).items():
                mine[second] = mine.get(second, 0) + n
        for code, n in other.unavailable_codes.items():
            self.unavailable_codes[code] = self.unavailable_codes.get(code, 0) + n
        self.missed += other.missed
        self.first_attempt = min(self.first_attempt, other.first_attempt)
        self.admitted_at.extend(other.admitted_at)
        self.admitted_latency.extend(other.admitted_latency)
        self.errors.extend(other.errors[: max(0, 5 - len(self.errors))])


# ---------------------------------------------------------------- the clients (child processes)


def _client_thread(spec: WorkerSpec, index: int, tally: Tally, limiter: Any) -> None:
    phase = spec.phase
    interval = spec.threads / spec.rate
    next_at = spec.start_at + interval * (index / spec.threads)
    end = spec.start_at + phase.seconds
    while next_at < end:
        now = time.time()
        if now < next_at:
            time.sleep(next_at - now)
        elif now - next_at > MAX_LATENESS_S:
            tally.missed += 1
            next_at += interval
            continue
        _attempt(limiter, phase, spec.start_at, tally)
        next_at += interval


def _attempt(limiter: Any, phase: Phase, start_at: float, tally: Tally) -> None:
    began = time.time()
    tally.first_attempt = min(tally.first_attempt, began)
    tally.add(tally.attempted, int(began - start_at))
    try:
        with limiter.acquire(phase.entity, RESOURCE, {"rps": 1}):
            pass
    except RateLimitExceeded:
        tally.add(tally.rejected, int(time.time() - start_at))
    except RateLimiterUnavailable as error:
        tally.add(tally.unavailable, int(time.time() - start_at))
        code = error.code or type(error).__name__
        tally.unavailable_codes[code] = tally.unavailable_codes.get(code, 0) + 1
    except Exception as error:  # counted, not fatal: the run must finish and report
        tally.add(tally.unavailable, int(time.time() - start_at))
        if len(tally.errors) < 5:
            tally.errors.append(f"{type(error).__name__}: {error}")
    else:
        done = time.time()
        tally.add(tally.admitted, int(done - start_at))
        tally.admitted_at.append(done)
        tally.admitted_latency.append(done - began)


def reserve_kwargs(reserve: bool | None) -> dict[str, Any]:
    """`reserve=` for `SyncRepository.open`, when asked for and when this version has it."""
    import inspect

    from zae_limiter import SyncRepository

    if reserve is None or "reserve" not in inspect.signature(SyncRepository.open).parameters:
        return {}
    return {"reserve": reserve}


def worker(spec: WorkerSpec, ready: Any, go: Any, start: Any, results: Any) -> None:
    """One client process: `spec.threads` client threads sharing `spec.rate` acquires/s.

    Every thread's repository is opened before `ready`; the parent then sets `start`
    (epoch seconds) and releases `go`.
    """
    from zae_limiter import SyncRateLimiter, SyncRepository

    options = reserve_kwargs(spec.phase.reserve)
    repos = [
        SyncRepository.open(
            name=spec.table,
            endpoint_url=spec.endpoint_url,
            partition_wcu=spec.phase.partition_wcu,
            max_shards=1 if spec.phase.pinned else 256,
            **options,
        )
        for _ in range(1 if spec.phase.shared_client else spec.threads)
    ]
    if spec.phase.shared_client:
        _warm_up(repos[0], spec.phase)
    ready.wait()
    go.wait()
    spec = WorkerSpec(
        spec.endpoint_url, spec.table, spec.phase, spec.rate, spec.threads, start.value
    )
    tallies = [Tally() for _ in range(spec.threads + 1)]
    limiters = [SyncRateLimiter(repo) for repo in repos]
    threads = [
        threading.Thread(
            target=_client_thread, args=(spec, i, tallies[i], limiters[i % len(limiters)])
        )
        for i in range(spec.threads)
    ]
    sampler = _Sampler(repos, spec.start_at, tallies[-1])
    for t in threads:
        t.start()
    sampler.start()
    for t in threads:
        t.join()
    sampler.stop()
    for repo in repos:
        repo.close()
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    results.put(total)


def _warm_up(repo: Any, phase: Phase) -> None:
    """One acquire on an entity of this process's own, before the start: connections are
    open and the engine has served this code path, as in a process that has been running.
    The measured entity is not touched."""
    import os

    from zae_limiter import SyncRateLimiter

    with SyncRateLimiter(repo).acquire(
        f"warm-{os.getpid()}", RESOURCE, {phase.limit.name: 1}, limits=[phase.limit]
    ):
        pass


class _Sampler:
    """Counts, per second, the throttles the clients saw and the returns they retried."""

    def __init__(self, repos: list[Any], start_at: float, tally: Tally) -> None:
        self.repos = repos
        self.start_at = start_at
        self.tally = tally
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._last = (0, 0)

    def _totals(self) -> tuple[int, int]:
        throttles = sum(r.get_capacity_stats().throttles for r in self.repos)
        books = [r.state.reserves for r in self.repos if r.state.reserves is not None]
        return throttles, sum(book.pacer.retried for book in books)

    def _sample(self) -> None:
        now = self._totals()
        second = int(time.time() - self.start_at)
        self.tally.client_throttles[second] = (
            self.tally.client_throttles.get(second, 0) + now[0] - self._last[0]
        )
        self.tally.returns_retried[second] = (
            self.tally.returns_retried.get(second, 0) + now[1] - self._last[1]
        )
        self._last = now

    def _loop(self) -> None:
        self._last = self._totals()
        while not self._done.wait(0.1):
            self._sample()
        self._sample()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
