"""Token reserves shared by many processes: exactness at the limit and under-admission.

- `exactness`: N processes acquire one token M times each from a bucket of 1,000 that
  never refills. Nothing may be created or lost: admitted <= 1,000 and, once every client
  has closed (returning its reserves), admitted + the tokens left == 1,000.
- `under_admission`: processes with different Poisson arrival rates share a limit that
  binds. Each logs every arrival (ms) and whether it was admitted; all arrivals, in time
  order, are then fed to one ideal token bucket with the same capacity and refill
  (`bucket.LimitState`, the table's own arithmetic) to see what a perfect limiter would
  have admitted, per second and in total.

The worker functions are module-level so that spawned processes can import them.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.bucket import LimitState
from zae_limiter.errors import ZaeLimiterError

RESOURCE = "api"
CAPACITY = 1000
#: One token per hour: nothing refills while the exactness run lasts.
NO_REFILL = Limit.custom("rpm", CAPACITY, 1, 3600)
#: Offered in the under-admission run: about twice the refill rate below.
RATES = (5.0, 20.0, 50.0, 100.0)
#: Refill 60/s against 175/s offered (it still binds when a busy machine slows the
#: clients down); the burst is two seconds of refill.
SHARED_LIMIT = Limit.custom("rps", 120, 60, 1)
#: An arrival this late behind its schedule is dropped (counted as missed), so a slow
#: machine makes fewer arrivals, not a burst of them.
MAX_LATE_S = 1.0
#: Acquires in flight at once per client process.
ARRIVAL_THREADS = 8
START_TIMEOUT_S = 120.0


def _stats(repo: SyncRepository) -> dict[str, int]:
    stats = repo.get_reserve_stats()
    return {"hits": stats.hits, "takes": stats.takes, "returns": stats.returns,
            "lost": stats.lost}  # fmt: skip


def _add(total: dict[str, int], part: dict[str, int]) -> None:
    for name, n in part.items():
        total[name] = total.get(name, 0) + n


# ---------------------------------------------------------------- exactness


def count_admitted(
    endpoint: str, table: str, entity: str, attempts: int, reserve: bool = True
) -> dict[str, int]:
    """One client process: acquire 1 token `attempts` times; admitted and reserve stats."""
    repo = SyncRepository.open(name=table, endpoint_url=endpoint, reserve=reserve)
    limiter = SyncRateLimiter(repo)
    admitted = 0
    for _ in range(attempts):
        try:
            with limiter.acquire(entity, RESOURCE, {"rpm": 1}):
                admitted += 1
        except RateLimitExceeded:
            pass
    repo.close()
    stats = _stats(repo)
    return {"admitted": admitted, **stats}


def prepare_exactness(endpoint: str, table: str, cascade: bool) -> tuple[str, str]:
    """Stored limits for the run; (entity acquired on, entity whose limit binds)."""
    with SyncRepository.open(name=table, endpoint_url=endpoint, reserve=False) as repo:
        limiter = SyncRateLimiter(repo)
        if not cascade:
            limiter.set_limits("key-1", [NO_REFILL], RESOURCE)
            return "key-1", "key-1"
        limiter.create_entity("proj-1")
        limiter.create_entity("key-1", parent_id="proj-1", cascade=True)
        # The child could take five times as much: the parent's 1,000 binds.
        child = Limit.custom("rpm", 5 * CAPACITY, 1, 3600)
        limiter.set_limits("key-1", [child], RESOURCE)
        limiter.set_limits("proj-1", [NO_REFILL], RESOURCE)
        return "key-1", "proj-1"


def bucket_now(endpoint: str, table: str, entity: str) -> dict[str, int]:
    """Tokens left (all shards) and tokens still held in reserves, read after the run."""
    with SyncRepository.open(name=table, endpoint_url=endpoint, reserve=False) as repo:
        limiter = SyncRateLimiter(repo)
        left = limiter.available(entity, RESOURCE).get("rpm", 0)
        shards = limiter.get_shards(entity, RESOURCE)
    held = sum(s.reserved.get("rpm", 0) for s in shards)
    return {"left": left, "held": held, "shards": len(shards)}


def exactness(
    endpoint: str, table: str, cascade: bool, processes: int = 8, attempts: int = 300
) -> dict[str, Any]:
    """Run the contention case with reserves on; what was admitted and what is left."""
    entity, binding = prepare_exactness(endpoint, table, cascade)
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        parts = pool.starmap(
            count_admitted, [(endpoint, table, entity, attempts, True)] * processes
        )
    total: dict[str, int] = {}
    for part in parts:
        _add(total, part)
    after = bucket_now(endpoint, table, binding)
    result: dict[str, Any] = {
        "cascade": cascade,
        "processes": processes,
        "attempts": processes * attempts,
        "capacity": CAPACITY,
        "admitted": total.pop("admitted"),
        "left": after["left"],
        "held_after_close": after["held"],
        "reserve": total,
    }
    result["conserved"] = result["admitted"] + result["left"] == CAPACITY
    if cascade:
        child = bucket_now(endpoint, table, entity)
        result["child_left"] = child["left"]
        result["child_conserved"] = result["admitted"] + child["left"] == 5 * CAPACITY
    return result


# ---------------------------------------------------------------- under-admission


@dataclass(slots=True)
class ArrivalLog:
    """What one client saw: (arrival ms, outcome) with outcome 1 admitted, 0 rejected,
    -1 failed (not a decision: the engine did not answer in time)."""

    rate: float
    arrivals: list[tuple[int, int]] = field(default_factory=list)
    missed: int = 0
    reserve: dict[str, int] = field(default_factory=dict)


def _arrive(limiter: SyncRateLimiter, entity: str, due: float, log: ArrivalLog) -> None:
    if time.time() - due > MAX_LATE_S:
        log.missed += 1  # one int add under the GIL per dropped arrival: fine here
        return
    at_ms = time.time_ns() // 1_000_000
    log.arrivals.append((at_ms, decide(limiter, entity)))


def decide(limiter: SyncRateLimiter, entity: str) -> int:
    """1 admitted, 0 rejected, -1 no decision (the engine did not answer in time)."""
    try:
        with limiter.acquire(entity, RESOURCE, {SHARED_LIMIT.name: 1}):
            return 1
    except RateLimitExceeded:
        return 0
    except ZaeLimiterError:
        return -1


def arrivals_worker(
    endpoint: str, table: str, entity: str, rate: float, seconds: float, seed: int,
    ready: Any, results: Any,
) -> None:  # fmt: skip
    """One client process: Poisson arrivals at `rate`/s for `seconds`, each one acquire.

    Arrivals are open-loop: each runs on a thread of a small pool when it is due, so a
    slow answer delays no later arrival (all threads share one repository and its book).
    """
    repo = SyncRepository.open(name=table, endpoint_url=endpoint)
    limiter = SyncRateLimiter(repo)
    rng = random.Random(seed)
    log = ArrivalLog(rate)
    limiter.available(entity, RESOURCE)  # the first call's connection and config reads
    ready.wait(timeout=START_TIMEOUT_S)
    start = time.time()
    offset = rng.expovariate(rate)
    with ThreadPoolExecutor(max_workers=ARRIVAL_THREADS) as pool:
        while offset < seconds:
            delay = start + offset - time.time()
            if delay > 0:
                time.sleep(delay)
            pool.submit(_arrive, limiter, entity, start + offset, log)
            offset += rng.expovariate(rate)
    repo.close()
    log.reserve = _stats(repo)
    results.put(log)


def limit_json(limit: Limit) -> dict[str, float]:
    return {
        "capacity": limit.capacity,
        "refill_per_s": limit.refill_amount / limit.refill_period_seconds,
    }


def ideal(arrivals_ms: list[int], limit: Limit) -> list[bool]:
    """What one ideal token bucket, full at the first arrival, admits of these arrivals."""
    state = LimitState(
        limit.capacity_milli, limit.capacity_milli, limit.refill_amount_milli,
        limit.refill_period_ms,
    )  # fmt: skip
    last = arrivals_ms[0] if arrivals_ms else 0
    admitted = []
    for at in arrivals_ms:
        state = state.refilled(last, at)
        last = max(last, at)
        ok = state.tokens_milli >= 1000
        if ok:
            state = replace(state, tokens_milli=state.tokens_milli - 1000)
        admitted.append(ok)
    return admitted


def compare(logs: list[ArrivalLog], limit: Limit) -> dict[str, Any]:
    """Admitted versus the ideal bucket fed the same arrivals: per second and in total."""
    merged = sorted(a for log in logs for a in log.arrivals)
    if not merged:
        return {"arrivals": 0}
    times = [at for at, _ in merged]
    perfect = ideal(times, limit)
    first = times[0]
    rows: dict[int, dict[str, int]] = {}
    real_sum = ideal_sum = 0
    worst_excess = 0
    for (at, outcome), ok in zip(merged, perfect, strict=True):
        real_sum += outcome == 1
        ideal_sum += ok
        worst_excess = max(worst_excess, real_sum - ideal_sum)
        row = rows.setdefault((at - first) // 1000, {"offered": 0, "admitted": 0, "ideal": 0})
        row["offered"] += 1
        row["admitted"] += outcome == 1
        row["ideal"] += ok
    return {
        "arrivals": len(merged),
        "admitted": real_sum,
        "ideal": ideal_sum,
        "share_of_ideal": round(real_sum / ideal_sum, 4) if ideal_sum else None,
        "failed": sum(1 for _, outcome in merged if outcome < 0),
        "worst_cumulative_excess": worst_excess,
        "per_second": [{"second": s, **rows[s]} for s in sorted(rows)],
    }


def under_admission(
    endpoint: str, table: str, seconds: float = 20.0, rates: tuple[float, ...] = RATES,
    limit: Limit = SHARED_LIMIT,
) -> dict[str, Any]:  # fmt: skip
    """Processes at `rates` share `limit` for `seconds`; the comparison with the ideal."""
    entity = "shared"
    with SyncRepository.open(name=table, endpoint_url=endpoint, reserve=False) as repo:
        SyncRateLimiter(repo).set_limits(entity, [limit], RESOURCE)
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(len(rates) + 1)
    results = context.Queue()
    procs = [
        context.Process(
            target=arrivals_worker,
            args=(endpoint, table, entity, rate, seconds, 1000 + i, ready, results),
        )
        for i, rate in enumerate(rates)
    ]
    for proc in procs:
        proc.start()
    ready.wait(timeout=START_TIMEOUT_S)
    logs: list[ArrivalLog] = [results.get(timeout=seconds + START_TIMEOUT_S) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    reserve: dict[str, int] = {}
    for log in logs:
        _add(reserve, log.reserve)
    return {
        "seconds": seconds,
        "rates": list(rates),
        "limit": limit_json(limit),
        "reserve": reserve,
        "missed": sum(log.missed for log in logs),
        **compare(logs, limit),
    }


class SimulatedClock:
    """Milliseconds that move only when told: a steady rate without waiting for it."""

    def __init__(self) -> None:
        self.now = float(time.time_ns() // 1_000_000)

    def __call__(self) -> int:
        return int(self.now)


def poisson_schedule(
    rates: tuple[float, ...], seconds: float, seed: int
) -> list[tuple[float, int]]:
    """(offset in seconds, client index) of every arrival, in time order."""
    rng = random.Random(seed)
    schedule = []
    for index, rate in enumerate(rates):
        offset = rng.expovariate(rate)
        while offset < seconds:
            schedule.append((offset, index))
            offset += rng.expovariate(rate)
    return sorted(schedule)


def simulated_under_admission(
    endpoint: str, table: str, seconds: float = 20.0, rates: tuple[float, ...] = RATES,
    limit: Limit = SHARED_LIMIT,
) -> dict[str, Any]:  # fmt: skip
    """The same arrivals as `under_admission`, driven from one process on a simulated
    clock: one repository per client, every arrival in time order, so the figure is the
    reserves' own under-admission, whatever the machine's load. What each client's keeper
    returns is written back every 100 simulated ms (`return_reserves(everything=False)`)."""
    entity = "shared-simulated"
    clock = SimulatedClock()
    repos = [SyncRepository.open(name=table, endpoint_url=endpoint, clock=clock) for _ in rates]
    try:
        limiters = [SyncRateLimiter(repo) for repo in repos]
        limiters[0].set_limits(entity, [limit], RESOURCE)
        logs = [ArrivalLog(rate) for rate in rates]
        started, tended = clock.now, 0.0
        for offset, index in poisson_schedule(rates, seconds, 7):
            clock.now = started + 1000 * offset
            if offset >= tended:
                for repo in repos:
                    repo.return_reserves(everything=False)
                tended = offset + 0.1
            logs[index].arrivals.append((clock(), decide(limiters[index], entity)))
    finally:
        for repo in repos:
            repo.close()
    reserve: dict[str, int] = {}
    for repo, log in zip(repos, logs, strict=True):
        log.reserve = _stats(repo)
        _add(reserve, log.reserve)
    return {
        "seconds": seconds,
        "rates": list(rates),
        "limit": limit_json(limit),
        "reserve": reserve,
        "missed": 0,
        **compare(logs, limit),
    }
