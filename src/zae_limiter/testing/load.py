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

    def add(self, column: dict[int, int], second: int) -> None:
        column[second] = column.get(second, 0) + 1

    def merge(self, other: Tally) -> None:
        for name in ("attempted", "admitted", "rejected", "unavailable"):
            mine: dict[int, int] = getattr(self, name)
            for second, n in getattr(other, name).items():
                mine[second] = mine.get(second, 0) + n
        for code, n in other.unavailable_codes.items():
            self.unavailable_codes[code] = self.unavailable_codes.get(code, 0) + n
        self.missed += other.missed
        self.first_attempt = min(self.first_attempt, other.first_attempt)
        self.admitted_at.extend(other.admitted_at)
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
        for _ in range(spec.threads)
    ]
    ready.wait()
    go.wait()
    spec = WorkerSpec(
        spec.endpoint_url, spec.table, spec.phase, spec.rate, spec.threads, start.value
    )
    tallies = [Tally() for _ in range(spec.threads)]
    threads = [
        threading.Thread(
            target=_client_thread, args=(spec, i, tallies[i], SyncRateLimiter(repos[i]))
        )
        for i in range(spec.threads)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for repo in repos:
        repo.close()
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    results.put(total)
