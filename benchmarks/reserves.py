"""Token reserves in numbers: requests, client CPU, exactness, under-admission, hot entity, cost.

1. One process, one entity with a generous limit, N back-to-back acquires, sync and async,
   reserves on and off (moto server): DynamoDB requests per acquire (every call the
   repository's capacity meter saw, from the first acquire through `close()`, which
   returns the reserves) and client CPU per acquire (`time.process_time`: the engine runs
   in another process).
2. Exactness and 3. under-admission: `reserves_shared` (DynamoDB Local, many processes).
4. A hot entity behind the partition emulator (`hot_entity.run_phase`, reserves on), with
   a probe in this process that times its own acquires on the same entity: the p50 of
   those served from a reserve is the latency once reserves are held.
5. Cost: one client acquiring at a steady rate on DynamoDB Local, its clock simulated (no
   waiting), the capacity DynamoDB reports per acquire, priced as in `benchmarks.cost`.

Figures are printed, never asserted. `SECTION` is the `reserves` section of `make bench`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import reserves_shared as shared
from benchmarks.cost import per_million
from benchmarks.engines import (
    DYNAMODB_LOCAL,
    MOTO,
    create_table,
    dynamodb_local_missing,
    running,
)
from benchmarks.latency import percentile
from benchmarks.reserves_report import markdown
from benchmarks.sections import Log, Section
from zae_limiter import (
    Limit,
    RateLimiter,
    Repository,
    SyncRateLimiter,
    SyncRepository,
)

RESOURCE = "api"
#: Never the bottleneck: the figures are the cost of admitting.
GENEROUS = Limit.per_second("rps", 1_000_000)
ACQUIRES = {False: 5000, True: 300}
EXACTNESS = {False: (8, 300), True: (4, 300)}
SHARED_SECONDS = {False: 20.0, True: 4.0}
#: Hot entity: (seconds, offered as a multiple of a partition's limit, processes).
HOT = {False: (15.0, 8, 4), True: (5.0, 4, 2)}
#: Steady client rates (acquires/s) priced in the cost rows, and acquires per rate.
COST_RATES = (10, 100, 1000)
COST_ACQUIRES = {False: 3000, True: 300}
PROBE_RATE = 20.0


@dataclass(frozen=True, slots=True)
class FaceRun:
    """N acquires by one client on one entity, reserves on or off."""

    face: str
    reserve: bool
    acquires: int
    requests: int
    wcu: float
    cpu_seconds: float
    wall_seconds: float
    hits: int
    takes: int
    returns: int

    @property
    def requests_per_acquire(self) -> float:
        return self.requests / self.acquires

    @property
    def cpu_us_per_acquire(self) -> float:
        return 1e6 * self.cpu_seconds / self.acquires


def _setup(endpoint: str, table: str, entities: list[str], limit: Limit) -> None:
    with SyncRepository.open(name=table, endpoint_url=endpoint, reserve=False) as repo:
        limiter = SyncRateLimiter(repo)
        for entity in entities:
            limiter.set_limits(entity, [limit], RESOURCE)


def sync_face(endpoint: str, table: str, entity: str, acquires: int, reserve: bool) -> FaceRun:
    repo = SyncRepository.open(name=table, endpoint_url=endpoint, reserve=reserve)
    limiter = SyncRateLimiter(repo)
    meter = repo.meter
    calls, wcu = meter.total_calls, meter.total_wcu
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(acquires):
        with limiter.acquire(entity, RESOURCE, {"rps": 1}):
            pass
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    repo.close()
    stats = repo.get_reserve_stats()
    return FaceRun(
        "sync", reserve, acquires, meter.total_calls - calls, meter.total_wcu - wcu, cpu, wall,
        stats.hits, stats.takes, stats.returns,
    )  # fmt: skip


async def async_face(
    endpoint: str, table: str, entity: str, acquires: int, reserve: bool
) -> FaceRun:
    repo = await Repository.open(name=table, endpoint_url=endpoint, reserve=reserve)
    limiter = RateLimiter(repo)
    meter = repo.meter
    calls, wcu = meter.total_calls, meter.total_wcu
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(acquires):
        async with limiter.acquire(entity, RESOURCE, {"rps": 1}):
            pass
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await repo.close()
    stats = repo.get_reserve_stats()
    return FaceRun(
        "async", reserve, acquires, meter.total_calls - calls, meter.total_wcu - wcu, cpu, wall,
        stats.hits, stats.takes, stats.returns,
    )  # fmt: skip


def one_client(acquires: int) -> list[FaceRun]:
    """Section 1 on a moto server this function starts."""
    with running(MOTO) as engine:
        url = engine.endpoint_url
        table = create_table(url)
        names = [f"{face}-{on}" for face in ("sync", "async") for on in (True, False)]
        _setup(url, table, names, GENEROUS)
        runs = [sync_face(url, table, f"sync-{on}", acquires, on) for on in (True, False)]
        for on in (True, False):
            runs.append(asyncio.run(async_face(url, table, f"async-{on}", acquires, on)))
    return runs


# ---------------------------------------------------------------- 4. hot entity


class _Probe:
    """Paced acquires on the hot entity from this process, each timed and marked as
    served from a reserve (the client's reserve hits went up) or not."""

    def __init__(self, endpoint: str, table: str, entity: str, partition_wcu: int) -> None:
        self.repo = SyncRepository.open(
            name=table, endpoint_url=endpoint, partition_wcu=partition_wcu
        )
        self.limiter = SyncRateLimiter(self.repo)
        self.entity = entity
        self.samples: list[tuple[float, bool]] = []
        self.failed = 0
        self.error = ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="reserve-probe", daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(1 / PROBE_RATE):
            hits = self.repo.get_reserve_stats().hits
            began = time.perf_counter()
            try:
                with self.limiter.acquire(self.entity, RESOURCE, {"rps": 1}):
                    pass
            except Exception as error:  # counted: a probe must not end the run
                self.failed += 1
                self.error = self.error or f"{type(error).__name__}: {error}"
                continue
            took = time.perf_counter() - began
            self.samples.append((took, self.repo.get_reserve_stats().hits > hits))

    def summary(self) -> dict[str, Any]:
        served = sorted(t for t, hit in self.samples if hit)
        written = sorted(t for t, hit in self.samples if not hit)
        every = sorted(t for t, _ in self.samples)
        return {
            "acquires": len(every),
            "failed": self.failed,
            "first_error": self.error,
            "from_reserve": len(served),
            "p50_ms": round(percentile(every, 50), 3),
            "p50_from_reserve_ms": round(percentile(served, 50), 3),
            "p99_from_reserve_ms": round(percentile(served, 99), 3),
            "p50_written_ms": round(percentile(written, 50), 3),
        }


def hot_entity(seconds: float, multiple: int, processes: int) -> dict[str, Any]:
    """Section 4: one entity offered `multiple` x a partition's write limit, reserves on."""
    from benchmarks import hot_entity as hot
    from benchmarks.hot_phase import run_phase
    from zae_limiter.testing.load import Phase

    partition = 50
    engine = hot.pick_engine()
    table = create_name()
    offered = float(multiple * partition)
    phase = Phase(
        "reserves", "hot-reserves", seconds, offered, Limit.per_second("rps", 100 * int(offered)),
        partition, pinned=False,
    )  # fmt: skip
    with hot.environment(engine, partition) as (upstream, emu):
        create_table(upstream, name=table)
        # Before the probe's first acquire: it would cache "no limits stored" otherwise.
        _setup(upstream, table, [phase.entity], phase.limit)
        probe = _Probe(emu.endpoint_url, table, phase.entity, partition)
        probe.thread.start()
        try:
            result = run_phase(emu, upstream, table, phase, processes)
        finally:
            probe.stop.set()
            probe.thread.join(timeout=10)
            probe.repo.close()
    summary = result["summary"]
    return {
        "engine": engine,
        "partition_limit": partition,
        "offered_rate": offered,
        "processes": processes,
        "seconds": seconds,
        "attempted": summary["attempted"],
        "attempted_share_of_offered": round(summary["attempted"] / (offered * seconds), 4),
        "admitted": summary["admitted"],
        "admitted_share": round(summary["admitted"] / max(1, summary["attempted"]), 4),
        "final_shard_count": summary["final_shard_count"],
        "rejections": summary["rejections"],  # false: the limit is 100x the offered rate
        "throttles": summary["throttles"],
        "errors": summary["errors"],
        "unavailable": summary["unavailable"],
        "probe": probe.summary(),
    }


def create_name() -> str:
    from benchmarks.engines import table_name

    return table_name("zael-bench-reserves")


# ---------------------------------------------------------------- 5. cost


def cost_at_rate(
    endpoint: str, table: str, entity: str, rate: int, acquires: int
) -> dict[str, Any]:
    clock = shared.SimulatedClock()
    repo = SyncRepository.open(name=table, endpoint_url=endpoint, clock=clock)
    limiter = SyncRateLimiter(repo)
    meter = repo.meter
    rcu, wcu, calls = meter.total_rcu, meter.total_wcu, meter.total_calls
    for _ in range(acquires):
        clock.now += 1000 / rate
        with limiter.acquire(entity, RESOURCE, {"rps": 1}):
            pass
    repo.close()
    stats = repo.get_reserve_stats()
    rcu, wcu = (meter.total_rcu - rcu) / acquires, (meter.total_wcu - wcu) / acquires
    return {
        "rate": rate,
        "acquires": acquires,
        "requests_per_acquire": round((meter.total_calls - calls) / acquires, 5),
        "rcu_per_acquire": round(rcu, 5),
        "wcu_per_acquire": round(wcu, 5),
        "dollars_per_million": round(per_million(rcu, wcu), 4),
        "takes": stats.takes,
        "returns": stats.returns,
    }


# ---------------------------------------------------------------- the section


def on_dynamodb_local(quick: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """Sections 2, 3 and 5 on one DynamoDB Local."""
    missing = dynamodb_local_missing()
    if missing:
        return {"note": f"not run: DynamoDB Local is not installed ({missing})"}
    processes, attempts = EXACTNESS[quick]
    data: dict[str, Any] = {}
    with running(DYNAMODB_LOCAL) as engine:
        url = engine.endpoint_url
        log("[bench] reserves: exactness ...")
        data["exactness"] = [
            shared.exactness(url, create_table(url), cascade, processes, attempts)
            for cascade in (False, True)
        ]
        log("[bench] reserves: under-admission ...")
        data["under_admission"] = shared.under_admission(
            url, create_table(url), SHARED_SECONDS[quick]
        )
        data["under_admission_simulated"] = shared.simulated_under_admission(
            url, create_table(url), SHARED_SECONDS[quick]
        )
        log("[bench] reserves: cost ...")
        table = create_table(url)
        entities = [f"cost-{rate}" for rate in COST_RATES]
        _setup(url, table, entities, GENEROUS)
        data["cost"] = [
            cost_at_rate(url, table, f"cost-{rate}", rate, COST_ACQUIRES[quick])
            for rate in COST_RATES
        ]
    return data


def run(
    quick: bool = False, log: Callable[[str], None] = print, failures: list[str] | None = None
) -> dict[str, Any]:
    """Every part of the section; a JSON-ready dict (parts that failed carry a note and
    are added to `failures`)."""
    started = time.monotonic()

    def _guarded(name: str, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except Exception as error:  # the other parts still run; the command fails at the end
            why = f"{name} failed: {type(error).__name__}: {error}"
            if failures is not None:
                failures.append(f"reserves: {why}")
            return {"note": why}

    def step(line: str) -> None:  # when each part starts, to see where the time goes
        log(f"{line} (at {time.monotonic() - started:.0f}s)")

    step("[bench] reserves: one client ...")
    data: dict[str, Any] = {"quick": quick}
    one = _guarded("one client", lambda: one_client(ACQUIRES[quick]))
    data["one_client"] = one if isinstance(one, dict) else [
        {**asdict(r), "requests_per_acquire": round(r.requests_per_acquire, 5),
         "cpu_us_per_acquire": round(r.cpu_us_per_acquire, 1)}
        for r in one
    ]  # fmt: skip
    local = _guarded("DynamoDB Local parts", lambda: on_dynamodb_local(quick, step))
    data.update(local if "note" not in local else {"dynamodb_local": local})
    step("[bench] reserves: hot entity ...")
    data["hot_entity"] = _guarded("hot entity", lambda: hot_entity(*HOT[quick]))
    return data


def _measure_section(_out: Path, quick: bool, log: Log, failures: list[str]) -> dict[str, Any]:
    return run(quick, log, failures)


SECTION = Section("reserves", _measure_section, markdown)
