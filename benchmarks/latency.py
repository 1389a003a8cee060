"""Latency, throughput and client CPU per call, sync and async, on a moto server.

Each workload runs back to back for a fixed time (after a short warm-up) and records
every call's wall time. Client CPU is `time.process_time()` over the whole workload
divided by the calls made: the engine runs in another process, so only the library,
botocore and the HTTP stack are counted. Moto answers in about a millisecond, so these
figures are the library's overhead, not DynamoDB's latency: add your network round trip
(about 1 ms in region) per round trip of the path (see the capacity table).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from benchmarks.engines import MOTO, create_table, running
from zae_limiter import (
    Limit,
    RateLimiter,
    RateLimitExceeded,
    Repository,
    SyncRateLimiter,
    SyncRepository,
)
from zae_limiter.errors import ZaeLimiterError

RESOURCE = "bench"
#: Never the bottleneck: a bucket that refills a million tokens a second.
LIMITS = [Limit.per_second("rps", 1_000_000)]
WARMUP_CALLS = 20
CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class LatencyResult:
    face: str  # "sync" or "async"
    workload: str
    workers: int
    calls: int
    rejected: int
    errors: int
    wall_seconds: float
    cpu_seconds: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float

    @property
    def throughput(self) -> float:
        return self.calls / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000 * self.cpu_seconds / self.calls if self.calls else 0.0


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (seconds in, milliseconds out)."""
    if not ordered:
        return 0.0
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return 1000 * ordered[rank]


@dataclass(slots=True)
class Tally:
    """What one worker saw: every call's wall time, rejections and errors."""

    samples: list[float] = field(default_factory=list)
    rejected: int = 0
    errors: int = 0

    def merge(self, other: Tally) -> None:
        self.samples += other.samples
        self.rejected += other.rejected
        self.errors += other.errors


def summarise(
    face: str, workload: str, workers: int, parts: list[Tally], wall: float, cpu: float
) -> LatencyResult:
    total = Tally()
    for part in parts:
        total.merge(part)
    ordered = sorted(total.samples)
    mean = 1000 * sum(ordered) / len(ordered) if ordered else 0.0
    return LatencyResult(
        face, workload, workers, len(ordered), total.rejected, total.errors, wall, cpu,
        percentile(ordered, 50), percentile(ordered, 95), percentile(ordered, 99), mean,
    )  # fmt: skip


# -- sync -------------------------------------------------------------------------------

SyncOp = Callable[[int], object]


def _sync_loop(op: SyncOp, worker: int, deadline: float) -> Tally:
    tally = Tally()
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        try:
            op(worker)
        except RateLimitExceeded:
            tally.rejected += 1
        except ZaeLimiterError:  # e.g. a timeout on an overloaded engine: counted
            tally.errors += 1
        tally.samples.append(time.perf_counter() - start)
    return tally


def run_sync(workload: str, op: SyncOp, workers: int, seconds: float) -> LatencyResult:
    for i in range(WARMUP_CALLS):
        op(i % workers)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    deadline = wall0 + seconds
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(lambda w: _sync_loop(op, w, deadline), range(workers)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return summarise("sync", workload, workers, parts, wall, cpu)


def _sync_ops(limiter: SyncRateLimiter) -> dict[str, SyncOp]:
    def acquire(entity: str) -> None:
        with limiter.acquire(entity, RESOURCE, {"rps": 1}):
            pass

    return {
        "acquire": lambda w: acquire(f"user-{w}"),
        "acquire, cascade": lambda w: acquire(f"child-{w}"),
        "acquire, one shared entity": lambda w: acquire("shared"),
        "available": lambda w: limiter.available(f"user-{w}", RESOURCE),
    }


def setup_entities(limiter: SyncRateLimiter, workers: int) -> None:
    limiter.set_system_defaults(LIMITS)
    limiter.create_entity("parent")
    for w in range(workers):
        limiter.create_entity(f"child-{w}", parent_id="parent", cascade=True)


SYNC_WORKLOADS: tuple[tuple[str, int], ...] = (
    ("acquire", 1),
    ("acquire, cascade", 1),
    ("available", 1),
    ("acquire", CONCURRENCY),
    ("acquire, one shared entity", CONCURRENCY),
)
ASYNC_WORKLOADS: tuple[tuple[str, int], ...] = (
    ("acquire", 1),
    ("acquire, cascade", 1),
    ("acquire", CONCURRENCY),
    ("acquire, one shared entity", CONCURRENCY),
)


def sync_suite(endpoint_url: str, table: str, seconds: float) -> list[LatencyResult]:
    with SyncRepository.open(name=table, endpoint_url=endpoint_url) as repo:
        limiter = SyncRateLimiter(repo)
        setup_entities(limiter, CONCURRENCY)
        ops = _sync_ops(limiter)
        return [run_sync(name, ops[name], n, seconds) for name, n in SYNC_WORKLOADS]


# -- async ------------------------------------------------------------------------------

AsyncOp = Callable[[int], Awaitable[object]]


async def _async_loop(op: AsyncOp, worker: int, deadline: float) -> Tally:
    tally = Tally()
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        try:
            await op(worker)
        except RateLimitExceeded:
            tally.rejected += 1
        except ZaeLimiterError:
            tally.errors += 1
        tally.samples.append(time.perf_counter() - start)
    return tally


async def run_async(workload: str, op: AsyncOp, workers: int, seconds: float) -> LatencyResult:
    for i in range(WARMUP_CALLS):
        await op(i % workers)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    deadline = wall0 + seconds
    parts = await asyncio.gather(*(_async_loop(op, w, deadline) for w in range(workers)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return summarise("async", workload, workers, list(parts), wall, cpu)


def _async_ops(limiter: RateLimiter) -> dict[str, AsyncOp]:
    async def acquire(entity: str) -> None:
        async with limiter.acquire(entity, RESOURCE, {"rps": 1}):
            pass

    return {
        "acquire": lambda w: acquire(f"user-{w}"),
        "acquire, cascade": lambda w: acquire(f"child-{w}"),
        "acquire, one shared entity": lambda w: acquire("shared"),
    }


async def async_suite(endpoint_url: str, table: str, seconds: float) -> list[LatencyResult]:
    async with await Repository.open(name=table, endpoint_url=endpoint_url) as repo:
        ops = _async_ops(RateLimiter(repo))
        return [await run_async(name, ops[name], n, seconds) for name, n in ASYNC_WORKLOADS]


def run(seconds: float = 5.0) -> list[LatencyResult]:
    """Every workload for `seconds` each, on a moto server this function starts."""
    with running(MOTO) as engine:
        table = create_table(engine.endpoint_url)
        results = sync_suite(engine.endpoint_url, table, seconds)
        results += asyncio.run(async_suite(engine.endpoint_url, table, seconds))
    return results
