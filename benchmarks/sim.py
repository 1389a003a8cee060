"""The fault simulator's search: `python -m benchmarks sim [--schedules N] [--seconds S]`
and the `sim` section of `make bench` (docs/simulator.md).

Prints schedules per second, `N operations/s` (the DynamoDB operations the in-memory
engine served), the faults injected by kind and `violations: K`; exits non-zero when a
schedule broke a guarantee. The engine alone is timed too (`zae_limiter.sim.engine.bench`:
the library's bucket UpdateItem on one core, CPU time).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.sections import Log, Section
from zae_limiter.sim.engine import bench as engine_bench
from zae_limiter.sim.search import default_jobs, report, search

#: What `python -m benchmarks sim` searches unless told otherwise.
SCHEDULES = 1_000_000
#: `make bench`'s section: bounded in time (the whole million takes hours on 2 cores).
SECTION_SECONDS = {False: 900.0, True: 60.0}


def measure(schedules: int, seconds: float | None, jobs: int, log: Log) -> dict[str, Any]:
    take_per_s = engine_bench.bench_take(20_000)
    log(f"[sim] the engine alone: {take_per_s:.0f} bucket UpdateItems/s on one core")
    started = time.monotonic()
    tally = search(0, schedules, jobs=jobs, seconds=seconds)
    wall = time.monotonic() - started
    text = report(tally, wall)
    log(text)
    return {
        "schedules": tally.schedules,
        "schedules_per_second": round(tally.schedules / wall, 1) if wall else 0,
        "schedules_per_cpu_second": round(tally.schedules / tally.cpu_seconds, 1)
        if tally.cpu_seconds
        else 0,
        "operations": tally.operations,
        "operations_per_second": round(tally.operations / wall) if wall else 0,
        "operations_per_cpu_second": round(tally.operations / tally.cpu_seconds)
        if tally.cpu_seconds
        else 0,
        "engine_updates_per_second_one_core": round(take_per_s),
        "faults": dict(sorted(tally.faults.items())),
        "violations": len(tally.failures),
        "failing_seeds": [seed for seed, _ in tally.failures[:50]],
        "jobs": jobs,
        "wall_seconds": round(wall, 1),
        "report": text,
    }


def _section(out_dir: Path, quick: bool, log: Log, failures: list[str]) -> dict[str, Any]:
    data = measure(SCHEDULES, SECTION_SECONDS[quick], default_jobs(), log)
    if data["violations"]:
        failures.append(f"sim: {data['violations']} schedules broke a guarantee")
    return data


def _render(data: dict[str, Any]) -> str:
    if "report" not in data:
        return str(data.get("note", ""))
    return (
        "```\n"
        + str(data["report"])
        + "\n```\n"
        + (
            f"engine alone: {data['engine_updates_per_second_one_core']} bucket UpdateItems/s "
            "on one core"
        )
    )


SECTION = Section("sim", _section, _render)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks sim")
    parser.add_argument("--schedules", type=int, default=SCHEDULES)
    parser.add_argument("--seconds", type=float, help="stop starting schedules after this")
    parser.add_argument("--jobs", type=int, default=default_jobs())
    args = parser.parse_args(argv)
    data = measure(args.schedules, args.seconds, args.jobs, print)
    return 1 if data["violations"] else 0
