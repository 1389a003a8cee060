"""The hot-entity phase runner: client processes offer one phase's load through the
partition emulator while the parent watches the shard count; per-second rows and a summary.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import threading
import time
from typing import Any

from zae_limiter.testing.emulator import Count, PartitionEmulator
from zae_limiter.testing.load import RESOURCE, Phase, Tally, WorkerSpec, worker

COLUMNS = (
    "second",
    "offered",
    "attempted",
    "admitted",
    "shard_count",
    "throttles",
    "rejections",
    "unavailable",
)


#: Each client thread offers at most this many acquires/s (one request in flight each).
RATE_PER_THREAD = 20.0
SUSTAIN_SHARE = 0.95
POLL_INTERVAL_S = 0.25
_ZERO = Count()


# ---------------------------------------------------------------- the parent: run and observe


class ShardPoller:
    """Polls `get_shards` from the parent; remembers shard counts per wall-clock second."""

    def __init__(self, limiter: Any, entity: str) -> None:
        self.limiter = limiter
        self.entity = entity
        self.seen: dict[int, tuple[int, int]] = {}  # epoch second -> (shard_count, items)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="shard-poller")

    def _loop(self) -> None:
        while not self._stop.wait(POLL_INTERVAL_S):
            try:
                shards = self.limiter.get_shards(self.entity, RESOURCE)
            except Exception:
                continue
            if not shards:
                continue  # no bucket yet: not a shard count of 0
            count = max((s.shard_count for s in shards if s.shard_id == 0), default=0)
            second = int(time.time())
            was = self.seen.get(second, (0, 0))
            self.seen[second] = (max(was[0], count), max(was[1], len(shards)))

    def __enter__(self) -> ShardPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run_clients(
    emu: PartitionEmulator, table: str, phase: Phase, processes: int, trace: str | None = None
) -> tuple[Tally, float]:
    """Start the client processes, line them up, run the phase; (merged tally, start).
    With `trace` (a directory), each process counts its requests by cause there
    (`benchmarks.hot_trace`)."""
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Barrier(processes + 1), ctx.Barrier(processes + 1)
    start = ctx.Value("d", 0.0)
    results = ctx.Queue()
    threads = phase.threads or max(1, math.ceil(phase.rate / processes / RATE_PER_THREAD))
    spec = WorkerSpec(emu.endpoint_url, table, phase, phase.rate / processes, threads, 0.0)
    target: Any = worker
    if trace is not None:
        from benchmarks.hot_trace import traced_worker

        target = functools.partial(traced_worker, trace)
    procs = [
        ctx.Process(target=target, args=(spec, ready, go, start, results)) for _ in range(processes)
    ]
    for p in procs:
        p.start()
    ready.wait(timeout=120)  # every client has opened its repositories
    # Start on a whole second, so emulator seconds line up with the rows of the report.
    start.value = float(math.ceil(time.time() + 0.2))
    go.wait(timeout=30)
    total = Tally()
    for _ in procs:
        total.merge(results.get(timeout=phase.seconds + 180))
    for p in procs:
        p.join(timeout=30)
    return total, float(start.value)


def _rows(
    phase: Phase, tally: Tally, start_at: float, emu: PartitionEmulator, poller: ShardPoller
) -> list[dict[str, Any]]:
    stats = emu.stats()
    rows = []
    shards = (1, 1)
    for second in range(int(phase.seconds)):
        epoch = int(start_at) + second
        shards = poller.seen.get(epoch, shards)
        rows.append(
            {
                "second": second,
                "offered": round(phase.rate),
                "attempted": tally.attempted.get(second, 0),
                "admitted": tally.admitted.get(second, 0),
                "shard_count": shards[0],
                "shard_items": shards[1],
                "throttles": stats.by_second.get(epoch, _ZERO).throttled,
                "forwarded_writes": stats.by_second.get(epoch, _ZERO).forwarded,
                "rejections": tally.rejected.get(second, 0),
                "unavailable": tally.unavailable.get(second, 0),
                "client_throttles": tally.client_throttles.get(second, 0),
                "returns_retried": tally.returns_retried.get(second, 0),
            }
        )
    return rows


def convergence(rows: list[dict[str, Any]], share: float = SUSTAIN_SHARE) -> int | None:
    """First second from which the shard count stays final, nothing is refused as
    unavailable, and admitted >= share x the load actually offered (attempted)."""
    found = None
    for row in reversed(rows):
        if (
            row["shard_count"] != rows[-1]["shard_count"]
            or row["unavailable"]
            or row["admitted"] < share * row["attempted"]
        ):
            break
        found = row["second"]
    return found


def _summary(phase: Phase, rows: list[dict[str, Any]], tally: Tally) -> dict[str, Any]:
    converged = convergence(rows)
    after = [r for r in rows if converged is not None and r["second"] >= converged]
    doublings = [
        {"second": r["second"], "shard_count": r["shard_count"]}
        for i, r in enumerate(rows)
        if i == 0 or r["shard_count"] != rows[i - 1]["shard_count"]
    ]
    first_double = next((d["second"] for d in doublings[1:]), None)
    return {
        "offered_rate": phase.rate,
        "limit": {"capacity": phase.limit.capacity, "refill_per_s": phase.limit.refill_amount},
        "client_partition_wcu": phase.partition_wcu,
        "pinned_to_one_shard": phase.pinned,
        "attempted": sum(r["attempted"] for r in rows),
        "missed_attempts": tally.missed,
        "admitted": sum(r["admitted"] for r in rows),
        "admitted_rate_mean": round(sum(r["admitted"] for r in rows) / max(1, len(rows)), 1),
        "admitted_rate_peak": max((r["admitted"] for r in rows), default=0),
        "rejections": sum(r["rejections"] for r in rows),
        "unavailable": sum(r["unavailable"] for r in rows),
        "throttles": sum(r["throttles"] for r in rows),
        "throttles_before_first_doubling": sum(
            r["throttles"] for r in rows if first_double is None or r["second"] < first_double
        ),
        "final_shard_count": rows[-1]["shard_count"] if rows else 0,
        "shard_count_changes": doublings,
        "convergence_second": converged,
        "after_convergence": _window(after),
        "unavailable_codes": tally.unavailable_codes,
        "errors": tally.errors,
    }


def _window(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    target = sum(r["offered"] for r in rows)
    attempted = sum(r["attempted"] for r in rows)
    admitted = sum(r["admitted"] for r in rows)
    return {
        "seconds": len(rows),
        "admitted_rate": round(admitted / len(rows), 1),
        "admitted_share_of_attempted": round(admitted / max(1, attempted), 4),
        "admitted_share_of_target": round(admitted / max(1, target), 4),
        # The clients could not offer the target rate: the machine, not the limiter, capped it.
        "client_bound": attempted < SUSTAIN_SHARE * target,
        "false_rejections": sum(r["rejections"] for r in rows),
        "unavailable": sum(r["unavailable"] for r in rows),
        "throttles": sum(r["throttles"] for r in rows),
    }


def over_admission(phase: Phase, tally: Tally) -> dict[str, Any]:
    """Admitted never exceeds capacity + refill x elapsed since the first attempt."""
    limit = phase.limit
    refill_per_s = limit.refill_amount / limit.refill_period_seconds
    worst = -math.inf
    for n, at in enumerate(sorted(tally.admitted_at), start=1):
        allowed = limit.capacity + refill_per_s * (at - tally.first_attempt)
        worst = max(worst, n - allowed)
    return {
        "capacity": limit.capacity,
        "refill_per_s": refill_per_s,
        "admitted": len(tally.admitted_at),
        "worst_excess_tokens": None if worst == -math.inf else round(worst, 2),
        "ok": worst <= 0,
    }


def run_phase(
    emu: PartitionEmulator,
    upstream: str,
    table: str,
    phase: Phase,
    processes: int,
    prime: bool = False,
    trace: str | None = None,
) -> dict[str, Any]:
    """Run one phase through the emulator; per-second rows and a summary. With `prime`,
    the entity's bucket exists before the start (one acquire, straight on the engine):
    the run measures a hot entity, not the race to create it."""
    from zae_limiter import SyncRateLimiter, SyncRepository

    emu.reset()
    # The parent watches the shards directly on the engine: its reads are not load.
    with SyncRepository.open(
        name=table, endpoint_url=upstream, partition_wcu=phase.partition_wcu
    ) as repo:
        limiter = SyncRateLimiter(repo)
        limiter.set_limits(phase.entity, [phase.limit], RESOURCE)
        if prime:
            with limiter.acquire(phase.entity, RESOURCE, {phase.limit.name: 1}):
                pass
        with ShardPoller(limiter, phase.entity) as poller:
            tally, start_at = _run_clients(emu, table, phase, processes, trace)
            time.sleep(POLL_INTERVAL_S * 2)
    rows = _rows(phase, tally, start_at, emu, poller)
    result = {"summary": _summary(phase, rows, tally), "seconds": rows, "start_at": start_at}
    operations = emu.stats().by_operation
    result["requests"] = {
        op: {"forwarded": c.forwarded, "throttled": c.throttled} for op, c in operations.items()
    }
    latencies = sorted(tally.admitted_latency)
    if latencies:
        result["admitted_latency_ms"] = {
            "p50": round(1000 * latencies[len(latencies) // 2], 3),
            "p99": round(1000 * latencies[int(len(latencies) * 0.99)], 3),
        }
    if phase.name == "tight":
        result["over_admission"] = over_admission(phase, tally)
    return result
