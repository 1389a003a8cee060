"""A hot entity under throttling (issue 23): reserves on and off, judged on their rows.

One entity offered 8x one partition's write rate (40/s against 5 writes/s per partition)
from 4 client processes for 30 s, each process one client shared by 4 threads (a server
process, warmed up on an entity of its own), behind the partition emulator. The entity's
bucket exists before the start: the runs measure a hot entity, not its creation. Two
runs, the library's defaults and `reserve=False`, each with its promises:

- defaults: >= 99% of the offered rate admitted over the whole run, no
  `RateLimiterUnavailable` after the first 5 s, at most 4 shards, p50 of an admitted
  acquire below 1 ms, and the emulator never refusing more than 2x the partition's limit
  in any second after the first 5;
- `reserve=False`: >= 95% admitted in the last 20 s, no `RateLimiterUnavailable` once
  the shard count has settled, at most twice the shards the load needs, the shards it
  needs by second 10, at most 2 requests (the emulator's count, reads included) per
  admitted acquire, and no timeouts. Its throttles per second are reported, not judged:
  until the count has grown, every acquire writes to a full partition.

    python -m benchmarks.hot_throttle --seconds 30
    python -m benchmarks.hot_throttle --no-reasons --shape fixed   # harder emulators
    python -m benchmarks.hot_throttle --only reserve-off           # one of the two runs

The emulator's throttles name whose limit refused them, as DynamoDB's do since 2025;
`--no-reasons` takes that away (the library then doubles on its windows alone), and
`--shape fixed` makes each partition's limit a window per wall-clock second.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.hot_phase import run_phase
from benchmarks.hot_scenarios import target_shards
from benchmarks.sections import Log, Section
from zae_limiter.errors import CALL_TIMEOUT
from zae_limiter.limits import Limit
from zae_limiter.testing.emulator import FIXED, SMOOTH, PartitionEmulator
from zae_limiter.testing.load import Phase

PARTITION_LIMIT = 5
OFFERED = 40.0
PROCESSES = 4
THREADS = 4
WARMUP_S = 5
SECONDS = 30.0
QUICK_SECONDS = 12.0
COLUMNS = (
    "second",
    "attempted",
    "admitted",
    "unavailable",
    "client_throttles",
    "throttles",
    "shard_count",
    "returns_retried",
)


def phase(name: str, reserve: bool | None, seconds: float) -> Phase:
    roomy = Limit.per_second("rps", 100 * int(OFFERED))  # every rejection would be false
    return Phase(
        name,
        f"throttle-{name}",
        seconds,
        OFFERED,
        roomy,
        PARTITION_LIMIT,
        pinned=False,
        reserve=reserve,
        shared_client=True,
        threads=THREADS,
    )


def _settled(rows: list[dict[str, Any]]) -> int:
    """The first second from which the shard count no longer changes and every shard it
    names exists (shard 0 records a doubling before the new shards are created)."""

    def shards(row: dict[str, Any]) -> tuple[int, int]:
        return row["shard_count"], row.get("shard_items", row["shard_count"])

    last = shards(rows[-1])
    at = len(rows)
    for row in reversed(rows):
        if shards(row) != last:
            break
        at = row["second"]
    return at


def judge(name: str, run: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Each promise of the run: its measured value and whether it holds."""
    rows = run["seconds"]
    offered = OFFERED * len(rows)
    after = [r for r in rows if r["second"] >= WARMUP_S]
    max_shards = max(r["shard_count"] for r in rows)
    checks: dict[str, Any] = {}
    worst_throttles = max((r["throttles"] for r in after), default=0)
    if name == "defaults":
        checks["emulator_throttles_per_s_after_5s"] = {
            "value": worst_throttles,
            "bound": 2 * PARTITION_LIMIT,
            "ok": worst_throttles <= 2 * PARTITION_LIMIT,
        }
        share = sum(r["admitted"] for r in rows) / offered
        p50 = run.get("admitted_latency_ms", {}).get("p50", float("inf"))
        late = sum(r["unavailable"] for r in after)
        checks["admitted_share"] = {"value": round(share, 4), "bound": 0.99, "ok": share >= 0.99}
        checks["unavailable_after_5s"] = {"value": late, "bound": 0, "ok": late == 0}
        checks["max_shards"] = {"value": max_shards, "bound": 4, "ok": max_shards <= 4}
        checks["p50_admitted_ms"] = {"value": p50, "bound": 1.0, "ok": p50 < 1.0}
    else:
        tail = rows[-20:] if seconds >= 20 else rows
        share = sum(r["admitted"] for r in tail) / (OFFERED * len(tail))
        settled = _settled(rows)
        # The row of the second the count changed in still holds that second's refusals.
        late = sum(r["unavailable"] for r in rows if r["second"] > settled)
        needed = target_shards(OFFERED, PARTITION_LIMIT)
        checks["admitted_share_last_20s"] = {
            "value": round(share, 4),
            "bound": 0.95,
            "ok": share >= 0.95,
        }
        checks["unavailable_after_settling"] = {"value": late, "settled_at": settled,
                                                "bound": 0, "ok": late == 0}  # fmt: skip
        checks["max_shards"] = {"value": max_shards, "bound": 2 * needed,
                                "ok": max_shards <= 2 * needed}  # fmt: skip
        grown = next((r["second"] for r in rows if r["shard_count"] >= needed), None)
        in_time = grown is not None and grown <= 10
        checks["second_at_needed_shards"] = {
            "value": grown,
            "needed": needed,
            "bound": 10,
            "ok": in_time,
        }
        requests = sum(c["forwarded"] + c["throttled"] for c in run.get("requests", {}).values())
        admitted = max(1, sum(r["admitted"] for r in rows))
        per = round(requests / admitted, 2)
        checks["requests_per_admitted"] = {"value": per, "bound": 2, "ok": per <= 2}
        # The acquire's deadline (CALL_TIMEOUT) and the SDK's socket timeouts
        # (ReadTimeoutError, ConnectTimeoutError): what a storm of requests does to an engine.
        codes = run.get("summary", {}).get("unavailable_codes", {})
        timeouts = sum(n for code, n in codes.items() if CALL_TIMEOUT in code)
        checks["timeouts"] = {"value": timeouts, "bound": 0, "ok": timeouts == 0}
        # Reported, not judged: while the count grows, every acquire meets a full partition.
        checks["emulator_throttles_per_s_after_settling"] = {
            "value": max((r["throttles"] for r in rows if r["second"] > settled), default=0),
            "bound": 2 * PARTITION_LIMIT,
            "ok": True,
        }
    return checks


RUNS: dict[str, bool | None] = {"defaults": None, "reserve-off": False}


def run(
    emu: PartitionEmulator,
    upstream: str,
    table: str,
    seconds: float = 30,
    only: tuple[str, ...] = tuple(RUNS),
    trace: str | None = None,
) -> dict[str, Any]:
    """The runs named in `only` (both by default) and their verdicts; with `trace` (a
    directory), every request counted by cause there (`benchmarks.hot_trace`)."""
    emu.writes_per_second = PARTITION_LIMIT
    out: dict[str, Any] = {}
    for name, reserve in RUNS.items():
        if name not in only:
            continue
        test = phase(name, reserve, seconds)
        where = None if trace is None else str(Path(trace) / name)
        if where is not None:
            Path(where).mkdir(parents=True, exist_ok=True)
        result = run_phase(emu, upstream, table, test, PROCESSES, prime=True, trace=where)
        result["checks"] = judge(name, result, seconds)
        out[name] = result
    return out


def failures(results: dict[str, Any]) -> list[str]:
    return [
        f"{name}: {check} = {facts['value']} (bound {facts['bound']})"
        for name, result in results.items()
        for check, facts in result["checks"].items()
        if not facts["ok"]
    ]


def markdown(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for name, result in results.items():
        lines += [
            f"## under throttling: {name} ({OFFERED:.0f}/s offered, {PARTITION_LIMIT} "
            f"writes/s per partition, {PROCESSES} processes)",
            "",
            "| " + " | ".join(COLUMNS) + " |",
            "|" + "---:|" * len(COLUMNS),
        ]
        lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in result["seconds"]]
        facts = {
            "checks": result["checks"],
            "latency": result.get("admitted_latency_ms"),
            "requests": result.get("requests"),
            "unavailable_codes": result.get("summary", {}).get("unavailable_codes"),
        }
        lines += ["", "```json", json.dumps(facts, indent=2), "```", ""]
    return lines


def measure_all(
    seconds: float,
    shape: str = SMOOTH,
    reasons: bool = True,
    only: tuple[str, ...] = tuple(RUNS),
    trace: str | None = None,
) -> dict[str, Any]:
    """The runs on a local engine of their own, behind the emulator (its `shape`, and
    whether its throttles give reasons)."""
    from benchmarks.engines import create_table
    from benchmarks.hot_entity import environment, pick_engine

    with environment(pick_engine(None), PARTITION_LIMIT, shape, reasons) as (upstream, emu):
        table = create_table(upstream, prefix="zael-bench-throttle")
        return run(emu, upstream, table, seconds, only, trace)


def _measure(out_dir: Path, quick: bool, log: Log, failed: list[str]) -> dict[str, Any]:
    results = measure_all(QUICK_SECONDS if quick else SECONDS)
    failed.extend(f"hot-throttle: {f}" for f in failures(results))
    return results


def _render(data: dict[str, Any]) -> str:
    if "note" in data:
        return f"## Hot entity under throttling\n\n{data['note']}\n"
    runs = {k: v for k, v in data.items() if isinstance(v, dict) and "checks" in v}
    return "\n".join(["## Hot entity under throttling", "", *markdown(runs)])


#: `make bench` runs it as its own section (a failed check fails the command).
SECTION = Section("hot-throttle", _measure, _render)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hot_throttle")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--out", default="bench-out")
    parser.add_argument("--shape", choices=[SMOOTH, FIXED], default=SMOOTH)
    parser.add_argument(
        "--no-reasons",
        action="store_true",
        help="throttles name no reason (DynamoDB before 2025): doubling on windows alone",
    )
    parser.add_argument("--only", choices=list(RUNS), action="append", help="this run only")
    parser.add_argument("--trace", help="count every request by cause in this directory")
    args = parser.parse_args(argv)
    only = tuple(args.only or RUNS)
    results = measure_all(args.seconds, args.shape, not args.no_reasons, only, args.trace)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hot_throttle.json").write_text(json.dumps(results, indent=2) + "\n")
    text = "\n".join(markdown(results))
    (out / "hot_throttle.md").write_text(text)
    print(text)
    if args.trace:
        from benchmarks.hot_trace import report

        for name in results:
            print(f"\nrequests by cause ({name}):\n{report(str(Path(args.trace) / name))}")
    failed = failures(results)
    for failure in failed:
        print(f"failed: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
