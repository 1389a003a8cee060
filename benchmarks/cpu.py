"""Client CPU per steady acquire: the lean request path against the regular client, and
against the published zae-limiter, on a moto server and on DynamoDB Local.

One entity acquires 1 unit of a limit that never binds, back to back (token reserves
off, so every acquire is one UpdateItem). `time.process_time()` over the acquires after
a warm-up, divided by their number: the engine runs in another process, so only this
client's CPU is counted (user and system, all threads). Each path runs ROUNDS rounds and
reports the median: on two cores a round that shares them with the engine's garbage
collector or JIT compiler reads high, the median of three does not follow it.

The published library runs in its own virtualenv (it has the same import name):
`ZAEL_PUBLISHED_PYTHON`, else `<out>/published-venv/bin/python`, created with
`pip install zae-limiter==PUBLISHED_VERSION` when missing. If it cannot be installed,
the report says so and shows absolute numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.engines import DYNAMODB_LOCAL, MOTO, create_table, dynamodb_local_missing
from benchmarks.engines import running as running_engine
from benchmarks.sections import Log, Section
from zae_limiter import Limit, RateLimiter, Repository, SyncRateLimiter, SyncRepository

PUBLISHED_VERSION = "0.17.0"
PUBLISHED_SCRIPT = Path(__file__).with_name("published_cpu.py")
LIMITS = [Limit.per_second("rps", 1_000_000)]
CALLS = {False: 1000, True: 300}  # per round
ROUNDS = 3
WARMUP = 50
FACES = ("sync", "async")


@dataclass(frozen=True, slots=True)
class CpuResult:
    engine: str
    face: str
    path: str  # "lean", "regular" or "published"
    calls: int
    cpu_ms: float  # the median round's
    rounds: tuple[float, ...] = ()


def _open_options(opener: Callable[..., Any], lean: bool) -> dict[str, Any]:
    options: dict[str, Any] = {"lean": lean}
    if "reserve" in inspect.signature(opener).parameters:
        options["reserve"] = False  # the per-acquire path
    return options


def measure_sync(url: str, table: str, lean: bool, calls: int) -> list[float]:
    """CPU ms per acquire in each of ROUNDS rounds of `calls`."""
    with SyncRepository.open(
        name=table, endpoint_url=url, **_open_options(SyncRepository.open, lean)
    ) as repo:
        limiter = SyncRateLimiter(repo)
        entity = f"cpu-sync-{lean}"
        for _ in range(WARMUP):
            with limiter.acquire(entity, "bench", {"rps": 1}, limits=LIMITS):
                pass
        rounds = []
        for _ in range(ROUNDS):
            start = time.process_time()
            for _ in range(calls):
                with limiter.acquire(entity, "bench", {"rps": 1}, limits=LIMITS):
                    pass
            rounds.append(1000 * (time.process_time() - start) / calls)
        return rounds


async def measure_async(url: str, table: str, lean: bool, calls: int) -> list[float]:
    options = _open_options(Repository.open, lean)
    async with await Repository.open(name=table, endpoint_url=url, **options) as repo:
        limiter = RateLimiter(repo)
        entity = f"cpu-async-{lean}"
        for _ in range(WARMUP):
            async with limiter.acquire(entity, "bench", {"rps": 1}, limits=LIMITS):
                pass
        rounds = []
        for _ in range(ROUNDS):
            start = time.process_time()
            for _ in range(calls):
                async with limiter.acquire(entity, "bench", {"rps": 1}, limits=LIMITS):
                    pass
            rounds.append(1000 * (time.process_time() - start) / calls)
        return rounds


def result(engine: str, face: str, path: str, calls: int, rounds: list[float]) -> CpuResult:
    return CpuResult(engine, face, path, calls, statistics.median(rounds), tuple(rounds))


def published_python(out_dir: Path, log: Callable[[str], None]) -> tuple[str | None, str]:
    """The published library's interpreter, installing it when missing; (path, note)."""
    given = os.environ.get("ZAEL_PUBLISHED_PYTHON")
    if given:
        return given, f"published zae-limiter from ZAEL_PUBLISHED_PYTHON={given}"
    venv = out_dir / "published-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        log(f"[bench] cpu: installing zae-limiter=={PUBLISHED_VERSION} into {venv} ...")
        try:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", f"zae-limiter=={PUBLISHED_VERSION}"],
                check=True,
                timeout=900,
                capture_output=True,
            )
        except (OSError, subprocess.SubprocessError) as error:
            return None, f"published zae-limiter not installable here ({error})"
    return str(python), f"published zae-limiter {PUBLISHED_VERSION} in {venv}"


def measure_published(python: str, url: str, face: str, calls: int) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [python, str(PUBLISHED_SCRIPT), url, face, str(calls), str(WARMUP), str(ROUNDS)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=True,
    )
    return [float(ms) for ms in json.loads(done.stdout.strip().splitlines()[-1])["rounds"]]


def run(
    quick: bool = False,
    published: str | None = None,
    engines: tuple[str, ...] | None = None,
    paths: tuple[str, ...] = ("regular", "lean"),
) -> list[CpuResult]:
    """Every face and path on each engine (DynamoDB Local only when installed)."""
    calls = CALLS[quick]
    if engines is None:
        engines = (MOTO,) if dynamodb_local_missing() else (MOTO, DYNAMODB_LOCAL)
    results: list[CpuResult] = []
    for engine in engines:
        with running_engine(engine) as started:
            url = started.endpoint_url
            table = create_table(url)
            for path in paths:
                lean = path == "lean"
                sync_ms = measure_sync(url, table, lean, calls)
                async_ms = asyncio.run(measure_async(url, table, lean, calls))
                results.append(result(engine, "sync", path, calls, sync_ms))
                results.append(result(engine, "async", path, calls, async_ms))
            if published is not None:
                for face in FACES:
                    ms = measure_published(published, url, face, calls)
                    results.append(result(engine, face, "published", calls, ms))
    return results


def markdown(results: list[CpuResult], note: str) -> str:
    by = {(r.engine, r.face, r.path): r.cpu_ms for r in results}
    lines = [
        "## Client CPU per steady acquire (lean path)",
        "",
        f"`bench.cpu`: {note}. CPU ms per acquire (`time.process_time`), the median of "
        f"{ROUNDS} rounds, token reserves off.",
        "",
        "| engine | face | published | regular | lean | lean / published | lean / regular |",
        "|---|---|---|---|---|---|---|",
    ]
    for engine, face in sorted({(r.engine, r.face) for r in results}):
        pub, reg, lean = (by.get((engine, face, p)) for p in ("published", "regular", "lean"))
        lines.append(
            f"| {engine} | {face} | {_ms(pub)} | {_ms(reg)} | {_ms(lean)} "
            f"| {_ratio(lean, pub)} | {_ratio(lean, reg)} |"
        )
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(part: float | None, whole: float | None) -> str:
    return "-" if part is None or not whole else f"{part / whole:.2f}"


def _measure_section(out_dir: Path, quick: bool, log: Log, _failures: list[str]) -> dict[str, Any]:
    python, note = published_python(out_dir, log)
    return {"note": note, "results": [asdict(r) for r in run(quick, python)]}


def _render_section(data: dict[str, Any]) -> str:
    if "results" not in data:
        return f"## Client CPU per steady acquire\n\n{data['note']}\n"
    return markdown([CpuResult(**r) for r in data["results"]], data["note"])


SECTION = Section("cpu", _measure_section, _render_section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cpu",
        description="Client CPU per steady acquire. To compare builds, run it from this "
        "checkout with PYTHONPATH=<other build>/src: the same bench measures that build.",
    )
    parser.add_argument("--quick", action="store_true", help="fewer acquires per round")
    parser.add_argument(
        "--engine", action="append", choices=[MOTO, DYNAMODB_LOCAL], help="repeatable"
    )
    parser.add_argument("--lean-only", action="store_true", help="the lean path alone")
    parser.add_argument("--no-published", action="store_true", help="without the published library")
    args = parser.parse_args(argv)
    if args.no_published:
        found, why = None, "published library not measured (--no-published)"
    else:
        found, why = published_python(Path("bench-results"), print)
    engines = tuple(args.engine) if args.engine else None
    paths = ("lean",) if args.lean_only else ("regular", "lean")
    print(markdown(run(args.quick, found, engines, paths), why))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
