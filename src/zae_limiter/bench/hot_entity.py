"""The hot-entity benchmark: one entity offered many times one partition's write limit.

DynamoDB throttles a partition past ~1,000 writes/s; moto and DynamoDB Local never do.
Here a `PartitionEmulator` stands in front of the local engine and throttles each
partition at `partition_limit` writes/s (50 by default: the same physics, scaled down),
and the clients are told the same limit (`partition_wcu`). Runs:

- unsharded: the entity is pinned to one shard; admissions cap near the partition
  limit and callers see the throttling (`RateLimiterUnavailable`);
- sharded: the client doubles the shard count as partitions run hot; the entity should
  reach `offered_multiple` shards and then sustain the offered rate;
- tight: a limit below the offered rate, to check that sharding never over-admits
  (admitted <= capacity + refill over the elapsed time, at every admission).

The entity's limit in the first two runs is far above the offered rate, so every
`RateLimitExceeded` there is a false rejection. Results go to `out_dir` as JSON, a
markdown table and (when matplotlib is installed) a PNG plot.

Scenarios (`scenarios=`), sharding alone (token reserves off), each judged against the
rule the library promises: with writes limited per partition key (5/s, then 50/s) and
8x that offered, the shard count must settle at the smallest power of two that keeps
every shard under 80% of the limit, or one more, and never pass it; with the whole
table limited below one partition's rate, it must not double at all.

    python -m zae_limiter.bench.hot_entity --seconds 20 --multiple 8 --out bench-out
    python -m zae_limiter.bench.hot_entity --only= --scenarios all --scenario-seconds 30
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from zae_limiter.limits import Limit
from zae_limiter.testing.emulator import FIXED, SMOOTH, Count, PartitionEmulator
from zae_limiter.testing.load import RESOURCE, Phase, Tally, WorkerSpec, worker

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
    emu: PartitionEmulator, table: str, phase: Phase, processes: int
) -> tuple[Tally, float]:
    """Start the client processes, line them up, run the phase; (merged tally, start)."""
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Barrier(processes + 1), ctx.Barrier(processes + 1)
    start = ctx.Value("d", 0.0)
    results = ctx.Queue()
    threads = max(1, math.ceil(phase.rate / processes / RATE_PER_THREAD))
    spec = WorkerSpec(emu.endpoint_url, table, phase, phase.rate / processes, threads, 0.0)
    procs = [
        ctx.Process(target=worker, args=(spec, ready, go, start, results)) for _ in range(processes)
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
    emu: PartitionEmulator, upstream: str, table: str, phase: Phase, processes: int
) -> dict[str, Any]:
    """Run one phase through the emulator; per-second rows and a summary."""
    from zae_limiter import SyncRateLimiter, SyncRepository

    emu.reset()
    # The parent watches the shards directly on the engine: its reads are not load.
    with SyncRepository.open(
        name=table, endpoint_url=upstream, partition_wcu=phase.partition_wcu
    ) as repo:
        limiter = SyncRateLimiter(repo)
        limiter.set_limits(phase.entity, [phase.limit], RESOURCE)
        with ShardPoller(limiter, phase.entity) as poller:
            tally, start_at = _run_clients(emu, table, phase, processes)
            time.sleep(POLL_INTERVAL_S * 2)
    rows = _rows(phase, tally, start_at, emu, poller)
    result = {"summary": _summary(phase, rows, tally), "seconds": rows}
    if phase.name == "tight":
        result["over_admission"] = over_admission(phase, tally)
    return result


def create_table(upstream: str, table: str) -> None:
    """Create the table with a patient client: DynamoDB Local can take a while on a busy box."""
    import boto3
    from botocore.config import Config

    from zae_limiter import SyncRepository
    from zae_limiter.repository import client_kwargs

    kwargs = client_kwargs(None, upstream)
    kwargs["config"] = kwargs["config"].merge(Config(read_timeout=60))
    client = boto3.session.Session().client("dynamodb", **kwargs)
    SyncRepository.open(name=table, client=client, create_table=True).close()


def pick_engine(engine: str | None = None) -> str:
    """DynamoDB Local when Java and the jar are installed (its writes are atomic); else moto."""
    from zae_limiter.local import DYNAMODB_LOCAL, MOTO, EngineNotInstalledError, find_jar, find_java

    if engine:
        return engine
    try:
        find_java()
        find_jar()
    except EngineNotInstalledError:
        return MOTO
    return DYNAMODB_LOCAL


def phases(seconds: float, offered_multiple: int, partition_limit: int) -> list[Phase]:
    offered = float(offered_multiple * partition_limit)
    roomy = Limit.per_second("rps", 100 * int(offered))  # every RateLimitExceeded is false
    tight = Limit.per_second("rps", int(offered / 2))
    return [
        Phase("unsharded", "hot-unsharded", seconds, offered, roomy, 10**9, pinned=True),
        Phase("sharded", "hot-sharded", seconds, offered, roomy, partition_limit, pinned=False),
        Phase("tight", "hot-tight", seconds, offered, tight, partition_limit, pinned=False),
    ]


@contextmanager
def environment(
    engine: str, partition_limit: int, shape: str = SMOOTH
) -> Iterator[tuple[str, Any]]:
    """A local engine, the emulator in front of it, and the fake AWS credentials it
    takes in this process's environment (spawned clients inherit them)."""
    from zae_limiter.local import LocalEngine, local_env

    running = LocalEngine.start(engine)
    saved = dict(os.environ)
    try:
        os.environ.pop("AWS_PROFILE", None)
        os.environ.pop("AWS_SESSION_TOKEN", None)
        env = local_env(running.endpoint_url)
        env.pop("AWS_ENDPOINT_URL")
        os.environ.update(env)
        with PartitionEmulator(running.endpoint_url, partition_limit, shape=shape) as emu:
            yield running.endpoint_url, emu
    finally:
        os.environ.clear()
        os.environ.update(saved)
        running.stop(grace=2.0)


RUN_NAMES = ("unsharded", "sharded", "tight")


def run(
    seconds: float = 20,
    offered_multiple: int = 8,
    partition_limit: int = 50,
    processes: int = 4,
    out_dir: str | Path | None = "bench-out",
    *,
    engine: str | None = None,
    shape: str = SMOOTH,
    only: tuple[str, ...] = RUN_NAMES,
    scenarios: tuple[str, ...] = (),
    scenario_seconds: float = 30,
) -> dict[str, Any]:
    """Run the benchmark; returns the results (and writes them to `out_dir` if given)."""
    # The scenarios are built from this module's runs: imported here, not at the top.
    from zae_limiter.bench.hot_scenarios import SCENARIOS, run_scenario

    engine = pick_engine(engine)
    table = f"zael-bench-{uuid.uuid4().hex[:8]}"
    results: dict[str, Any] = {
        "engine": engine,
        "config": {
            "seconds": seconds,
            "offered_multiple": offered_multiple,
            "partition_limit": partition_limit,
            "offered_rate": offered_multiple * partition_limit,
            "processes": processes,
            "emulator_shape": shape,
        },
        "runs": {},
        "scenarios": {},
    }
    with environment(engine, partition_limit, shape) as (upstream, emu):
        create_table(upstream, table)
        for phase in phases(seconds, offered_multiple, partition_limit):
            if phase.name in only:
                results["runs"][phase.name] = run_phase(emu, upstream, table, phase, processes)
        for scenario in SCENARIOS:
            if scenario.name in scenarios:
                results["scenarios"][scenario.name] = run_scenario(
                    emu, upstream, table, scenario, scenario_seconds, processes
                )
    if out_dir is not None:
        write_report(results, Path(out_dir))
    return results


# ---------------------------------------------------------------- the report


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


def markdown(results: dict[str, Any]) -> str:
    config = results["config"]
    lines = [
        "# Hot-entity benchmark",
        "",
        f"Engine: {results['engine']} behind the partition emulator "
        f"({config['partition_limit']} writes/s per partition, {config['emulator_shape']}); "
        f"one entity offered {config['offered_rate']}/s ({config['offered_multiple']}x) from "
        f"{config['processes']} processes for {config['seconds']} s.",
    ]
    for name, run in results["runs"].items():
        lines += ["", f"## {name}", "", "| " + " | ".join(COLUMNS) + " |"]
        lines.append("|" + "---:|" * len(COLUMNS))
        lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in run["seconds"]]
        lines += ["", "```json", json.dumps(run["summary"], indent=2), "```"]
        if "over_admission" in run:
            lines += ["", f"Over-admission check: `{json.dumps(run['over_admission'])}`"]
    from zae_limiter.bench.hot_scenarios import scenario_markdown

    for name, run in results.get("scenarios", {}).items():
        lines += ["", *scenario_markdown(name, run)]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> str | None:
    """Write the PNG; returns why not when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot (pip install matplotlib)"
    runs = [(n, r) for n, r in results["runs"].items() if n != "tight"]
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 4 * len(runs)), squeeze=False)
    for ax, (name, run) in zip(axes[:, 0], runs, strict=True):
        rows = run["seconds"]
        xs = [r["second"] for r in rows]
        ax.plot(xs, [r["offered"] for r in rows], "k--", label="offered/s")
        ax.plot(xs, [r["admitted"] for r in rows], "g-", label="admitted/s")
        ax.plot(xs, [r["throttles"] for r in rows], "r-", label="throttles/s")
        ax.set_title(name)
        ax.set_xlabel("second")
        ax.legend(loc="upper left")
        shards = ax.twinx()
        shards.step(xs, [r["shard_count"] for r in rows], "b-", where="post")
        shards.set_ylabel("shard count", color="b")
        shards.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def write_report(results: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "hot_entity.json").write_text(json.dumps(results, indent=2) + "\n")
    (out_dir / "hot_entity.md").write_text(markdown(results))
    skipped = plot(results, out_dir / "hot_entity.png")
    if skipped:
        print(skipped)


def _scenarios() -> Any:
    from zae_limiter.bench.hot_scenarios import SCENARIOS

    return SCENARIOS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zae_limiter.bench.hot_entity")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--multiple", type=int, default=8, help="offered rate / partition limit")
    parser.add_argument("--limit", type=int, default=50, help="writes/s per partition")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--out", default="bench-out")
    parser.add_argument("--engine", choices=["moto", "dynamodb-local"], default=None)
    parser.add_argument("--shape", choices=[SMOOTH, FIXED], default=SMOOTH)
    parser.add_argument("--only", default=",".join(RUN_NAMES), help="runs ('' for none)")
    parser.add_argument(
        "--scenarios", default="", help="'all' or some of partition-5,partition-50,table-level"
    )
    parser.add_argument("--scenario-seconds", type=float, default=30)
    args = parser.parse_args(argv)
    names = ",".join(s.name for s in _scenarios())
    chosen = names.split(",") if args.scenarios == "all" else args.scenarios.split(",")
    results = run(
        args.seconds,
        args.multiple,
        args.limit,
        args.processes,
        args.out,
        engine=args.engine,
        shape=args.shape,
        only=tuple(args.only.split(",")),
        scenarios=tuple(n for n in chosen if n),
        scenario_seconds=args.scenario_seconds,
    )
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
