"""The whole benchmark: every section on engines it starts, one report at the end."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks import capacity, cpu, exactness, hot_throttle, latency, reserves, sim, web
from benchmarks.report import Report

DEFAULT_OUT = Path("bench-results")
SECTIONS = (
    "capacity",
    "latency",
    "hot-entity",
    "hot-throttle",
    "web",
    "cpu",
    "reserves",
    "exactness",
    "sim",
)
LATENCY_SECONDS = {False: 5.0, True: 1.5}
#: Arguments for `hot_entity.run`, full and quick; only those it accepts are passed.
#: The scenarios (hot_scenarios.py) run after the runs, with token reserves off.
HOT_SCENARIOS = ("partition-5", "partition-50", "table-level")
HOT_ENTITY_ARGS: dict[bool, dict[str, Any]] = {
    False: {"seconds": 20, "offered_multiple": 8, "processes": 4,
            "scenarios": HOT_SCENARIOS, "scenario_seconds": 30},
    True: {"seconds": 6, "offered_multiple": 4, "processes": 2,
           "scenarios": HOT_SCENARIOS, "scenario_seconds": 8},
}  # fmt: skip


@contextmanager
def timed(report: Report, section: str, log: Callable[[str], None]) -> Iterator[None]:
    log(f"[bench] {section} ...")
    start = time.monotonic()
    try:
        yield
    finally:
        report.seconds[section] = time.monotonic() - start
        log(f"[bench] {section} done in {report.seconds[section]:.0f}s")


def hot_entity_section(
    out_dir: Path, quick: bool, failures: list[str] | None = None
) -> tuple[dict[str, Any] | None, str]:
    """Run `benchmarks.hot_entity.run` when that module exists; (results, note for the report)."""
    try:
        from benchmarks import hot_entity
    except ImportError as missing:
        return None, f"not available: benchmarks.hot_entity cannot be imported ({missing})"
    run = getattr(hot_entity, "run", None)
    if run is None:
        return None, "not available: benchmarks.hot_entity has no run()"
    wanted = {**HOT_ENTITY_ARGS[quick], "out_dir": out_dir / "hot-entity"}
    accepted = inspect.signature(run).parameters
    kwargs = {k: v for k, v in wanted.items() if k in accepted}
    try:
        result = run(**kwargs)
    except Exception as error:  # the other sections still run; the command fails at the end
        if failures is not None:
            failures.append(f"hot-entity: {type(error).__name__}: {error}")
        return None, f"failed: {type(error).__name__}: {error}"
    shown = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    note = f"`hot_entity.run({shown})`; plot and tables in `{out_dir / 'hot-entity'}`"
    return (result if isinstance(result, dict) else {"result": repr(result)}), note


def run(
    out_dir: Path = DEFAULT_OUT,
    quick: bool = False,
    sections: tuple[str, ...] = SECTIONS,
    command: str = "python -m benchmarks",
    log: Callable[[str], None] = print,
    capacity_engine: str | None = None,
) -> Report:
    report = Report(command=command, quick=quick)
    total = time.monotonic()
    if "capacity" in sections:
        with timed(report, "capacity", log):
            report.capacity = capacity.run(capacity_engine)
    if "latency" in sections:
        with timed(report, "latency", log):
            report.latency = latency.run(LATENCY_SECONDS[quick])
    if "hot-entity" in sections:
        with timed(report, "hot-entity", log):
            report.hot_entity, report.hot_entity_note = hot_entity_section(
                out_dir, quick, report.failures
            )
    else:
        report.hot_entity_note = "skipped (--skip hot-entity)"
    extra = (
        hot_throttle.SECTION,
        web.SECTION,
        reserves.SECTION,
        cpu.SECTION,
        exactness.SECTION,
        sim.SECTION,
    )
    for section in extra:
        report.extra.update(section.run(out_dir, quick, sections, log, report.failures))
    report.seconds["total"] = time.monotonic() - total
    return report
