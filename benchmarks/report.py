"""The benchmark report: one object, rendered as a markdown table and as JSON."""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.capacity import CapacityRun, PathResult
from benchmarks.cost import (
    RRU_PRICE_PER_MILLION,
    WRU_PRICE_PER_MILLION,
    PathCost,
    costs,
)
from benchmarks.latency import LatencyResult

MARKDOWN_NAME = "report.md"
JSON_NAME = "report.json"


def environment() -> dict[str, str]:
    import botocore

    return {
        "uname": " ".join(platform.uname()),
        "python": sys.version.split()[0],
        "cpus": str(os.cpu_count()),
        "botocore": botocore.__version__,
    }


@dataclass(slots=True)
class Report:
    command: str
    quick: bool
    environment: dict[str, str] = field(default_factory=environment)
    capacity: CapacityRun | None = None
    latency: list[LatencyResult] = field(default_factory=list)
    latency_engine: str = "moto"
    hot_entity: dict[str, Any] | None = None
    hot_entity_note: str = "not run"
    seconds: dict[str, float] = field(default_factory=dict)
    #: Markdown of further sections by name (e.g. "web"), shown after the others.
    extra: dict[str, str] = field(default_factory=dict)
    #: Sections (or parts) that failed, with why: the command exits non-zero.
    failures: list[str] = field(default_factory=list)

    @property
    def costs(self) -> list[PathCost]:
        return costs(self.capacity) if self.capacity else []

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "command": self.command,
            "quick": self.quick,
            "environment": self.environment,
            "seconds": self.seconds,
            "capacity": None,
            "latency": [
                {**asdict(r), "throughput": r.throughput, "cpu_ms_per_call": r.cpu_ms_per_call}
                for r in self.latency
            ],
            "latency_engine": self.latency_engine,
            "hot_entity": self.hot_entity,
            "hot_entity_note": self.hot_entity_note,
            "failures": self.failures,
        }
        if self.capacity is not None:
            data["capacity"] = {
                "source": self.capacity.source,
                "engine": self.capacity.engine,
                "why_modelled": self.capacity.why_modelled,
                "paths": [_path_json(p) for p in self.capacity.paths],
            }
            data["cost_per_million"] = {
                "prices": {"wru": WRU_PRICE_PER_MILLION, "rru": RRU_PRICE_PER_MILLION},
                "paths": {c.key: round(c.dollars_per_million, 4) for c in self.costs},
            }
        return data

    def to_markdown(self) -> str:
        parts = [_header(self)]
        if self.capacity is not None:
            parts += [_capacity_md(self.capacity), _cost_md(self.costs)]
        if self.latency:
            parts.append(_latency_md(self.latency, self.latency_engine))
        parts.append(_hot_entity_md(self.hot_entity, self.hot_entity_note))
        parts += list(self.extra.values())
        if self.failures:
            parts.append("## Failed\n\n" + "\n".join(f"- {f}" for f in self.failures))
        return "\n\n".join(parts) + "\n"

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        md, js = out_dir / MARKDOWN_NAME, out_dir / JSON_NAME
        md.write_text(self.to_markdown())
        js.write_text(json.dumps(self.to_json(), indent=2, default=str) + "\n")
        return md, js


def _path_json(p: PathResult) -> dict[str, Any]:
    return {
        "key": p.budget.key,
        "title": p.budget.title,
        "ops": list(p.ops),
        "measured": asdict(p.measured),
        "expected": asdict(p.budget.library),
        "design": asdict(p.budget.design) if p.budget.design else None,
        "matches": p.matches,
        "note": p.budget.note,
    }


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _header(report: Report) -> str:
    env = report.environment
    took = ", ".join(f"{k} {v:.0f}s" for k, v in report.seconds.items())
    return "\n".join(
        [
            "# zae-limiter benchmark" + (" (quick)" if report.quick else ""),
            "",
            f"- command: `{report.command}`",
            f"- machine: {env['uname']}; {env['cpus']} CPUs",
            f"- python {env['python']}, botocore {env['botocore']}",
            f"- time taken: {took or 'n/a'}",
        ]
    )


def _units(value: float) -> str:
    return f"{value:g}"


def _design(p: PathResult) -> str:
    d = p.budget.design
    if d is None:
        return "-"
    text = f"{d.round_trips} / {_units(d.rcu)} / {_units(d.wcu)}"
    better = (p.measured.round_trips, p.measured.rcu, p.measured.wcu) < (
        d.round_trips, d.rcu, d.wcu,
    )  # fmt: skip
    return text + (" (library does better)" if better and p.measured != d else "")


def _capacity_md(run: CapacityRun) -> str:
    rows = [
        [
            p.budget.title,
            str(p.measured.round_trips),
            _units(p.measured.rcu),
            _units(p.measured.wcu),
            _design(p),
            "yes" if p.matches else f"NO (expected {p.budget.library})",
            ", ".join(p.ops) or "none",
        ]
        for p in run.paths
    ]
    head = ["path", "round trips", "RCU", "WCU incl. indexes", "DESIGN.md s.4 (RT/RCU/WCU)",
            "as budgeted", "calls"]  # fmt: skip
    why = f" ({run.why_modelled})" if run.why_modelled else ""
    notes = [f"- {p.budget.title}: {p.budget.note}" for p in run.paths if p.budget.note]
    return "\n".join(
        [f"## Capacity per acquire path: {run.source}{why}", "", _table(head, rows), "", *notes]
    )


def _cost_md(path_costs: list[PathCost]) -> str:
    rows = [
        [c.title, _units(c.rcu), _units(c.wcu), f"${c.dollars_per_million:.3f}"] for c in path_costs
    ]
    return "\n".join(
        [
            f"## Cost per million acquires (on-demand: ${WRU_PRICE_PER_MILLION} per million "
            f"WRU, ${RRU_PRICE_PER_MILLION} per million RRU)",
            "",
            _table(["path", "RRU", "WRU", "$ per million"], rows),
        ]
    )


def _latency_md(results: list[LatencyResult], engine: str) -> str:
    rows = [
        [
            r.face, r.workload, str(r.workers), str(r.calls), str(r.errors),
            f"{r.p50_ms:.1f}", f"{r.p95_ms:.1f}", f"{r.p99_ms:.1f}",
            f"{r.throughput:.0f}", f"{r.cpu_ms_per_call:.2f}",
        ]
        for r in results
    ]  # fmt: skip
    head = ["face", "workload", "workers", "calls", "errors", "p50 ms", "p95 ms", "p99 ms",
            "calls/s", "client CPU ms/call"]  # fmt: skip
    return "\n".join([f"## Latency and throughput ({engine} server)", "", _table(head, rows)])


HOT_ENTITY_FIELDS = (
    ("offered_rate", "offered/s"),
    ("admitted_rate_mean", "admitted/s (mean)"),
    ("final_shard_count", "final shards"),
    ("convergence_second", "converged at s"),
    ("throttles", "throttles"),
    ("rejections", "rejections"),
    ("unavailable", "unavailable"),
)


def _hot_entity_md(result: dict[str, Any] | None, note: str) -> str:
    title = "## Hot entity"
    runs = (result or {}).get("runs")
    if not isinstance(runs, dict) or not runs:
        return f"{title}\n\n{note}"
    rows = []
    for name, run in runs.items():
        summary = run.get("summary", {}) if isinstance(run, dict) else {}
        rows.append([name, *(str(summary.get(k, "-")) for k, _ in HOT_ENTITY_FIELDS)])
        over = run.get("over_admission") if isinstance(run, dict) else None
        if over:
            rows[-1][0] += f" (never over-admits: {over.get('ok')})"
    head = ["run", *(label for _, label in HOT_ENTITY_FIELDS)]
    return "\n".join([title, "", note, "", _table(head, rows)])
