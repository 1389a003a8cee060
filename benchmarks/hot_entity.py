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

    python -m benchmarks.hot_entity --seconds 20 --multiple 8 --out bench-out
    python -m benchmarks.hot_entity --only= --scenarios all --scenario-seconds 30
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.engines import (
    DYNAMODB_LOCAL,
    MOTO,
    create_table,
    dynamodb_local_missing,
    local_environment,
)
from benchmarks.hot_phase import COLUMNS, run_phase
from benchmarks.hot_scenarios import SCENARIOS, run_scenario, scenario_markdown
from zae_limiter.limits import Limit
from zae_limiter.local import LocalEngine
from zae_limiter.testing.emulator import FIXED, SMOOTH, PartitionEmulator
from zae_limiter.testing.load import Phase


def pick_engine(engine: str | None = None) -> str:
    """DynamoDB Local when Java and the jar are installed (its writes are atomic); else moto."""
    if engine:
        return engine
    return MOTO if dynamodb_local_missing() else DYNAMODB_LOCAL


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
    engine: str, partition_limit: int, shape: str = SMOOTH, reasons: bool = True
) -> Iterator[tuple[str, Any]]:
    """A local engine, the emulator in front of it, and the fake AWS credentials it takes
    in this process's environment (spawned clients inherit them). No AWS_ENDPOINT_URL: the
    clients are pointed at the emulator, the parent's shard poller at the engine.
    `reasons`: whether a throttle names whose limit refused it (DynamoDB's
    ThrottlingReasons, since 2025)."""
    running = LocalEngine.start(engine)
    try:
        with (
            local_environment(running.endpoint_url, endpoint_variable=False),
            PartitionEmulator(
                running.endpoint_url, partition_limit, shape=shape, throttling_reasons=reasons
            ) as emu,
        ):
            yield running.endpoint_url, emu
    finally:
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
        create_table(upstream, name=table)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hot_entity")
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
    names = ",".join(s.name for s in SCENARIOS)
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
