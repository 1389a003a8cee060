"""Exact at the top of the bucket: burst scenarios, admitted against an ideal bucket.

One limit (capacity 10, 5 per second) on DynamoDB Local. Each scenario brings a bucket to
a burst of 40 back-to-back acquires (after sitting idle, after a trickle that keeps it
near full, after a drain and a refill: `tests.exactness_model.burst_scenarios`), in real
time, once for this library with token reserves off and on, and once for the published
zae-limiter. The times at which the acquires were made are fed to an ideal token bucket
(`tests.exactness_model`, exact arithmetic) to get what it would have admitted.

Every run is a subprocess of `exactness_run.py`: the published library has this one's
import name, so it runs in its own virtualenv (`.ci/install-published`, or
ZAEL_PUBLISHED_PYTHON). The ideal bucket comes from the test suite: the benchmark runs
from a source checkout. A run that fails fails the command; so does this library
admitting more than the ideal + 1 once `OVER_ADMITS_AT_THE_TOP` is off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.engines import DYNAMODB_LOCAL, create_table, dynamodb_local_missing
from benchmarks.engines import running as running_engine
from benchmarks.sections import Section
from zae_limiter import Limit

RUNNER = Path(__file__).with_name("exactness_run.py")
INSTALL_PUBLISHED = Path(__file__).parents[1] / ".ci" / "install-published"
#: A refill slower than issue 22's 10 per second: on a loaded machine a burst of 40 can
#: last seconds, and a fast refill would hide an over-admission under a long burst.
LIMIT = Limit.per_second("rps", 5, burst=10)
FILL_MS = 2000
SLACK = 1
#: (label, api, reserve) of each run.
RUNS = (
    ("this library, reserves off", "ours", False),
    ("this library, reserves on", "ours", True),
    ("published zae-limiter 0.17.0", "published", False),
)
RUN_TIMEOUT_S = 300


def _model() -> ModuleType:
    # Imported when the section runs, not with the suite: the bench runs from a checkout.
    from tests import exactness_model

    return exactness_model


def published_python(log: Callable[[str], None]) -> str:
    given = os.environ.get("ZAEL_PUBLISHED_PYTHON")
    if given:
        return given
    log("[bench] exactness: .ci/install-published ...")
    done = subprocess.run(
        ["bash", str(INSTALL_PUBLISHED)], check=True, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


def play(python: str, url: str, table: str, api: str, reserve: bool) -> dict[str, Any]:
    plans = {s.name: [a.offset_ms for a in s.arrivals] for s in _scenarios()}
    job = {"table": table, "limit": [LIMIT.name, LIMIT.capacity, LIMIT.refill_amount],
           "plans": plans}  # fmt: skip
    done = subprocess.run(
        [python, str(RUNNER), url, api, "1" if reserve else "0"],
        input=json.dumps(job), capture_output=True, text=True, check=False,
        timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{api} run exited {done.returncode}: {' / '.join(tail)}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _scenarios() -> list[Any]:
    scenarios: list[Any] = _model().burst_scenarios(FILL_MS, burst=40, burst_gap_ms=0)
    return scenarios


def judged(seen: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for scenario in _scenarios():
        pairs = [(int(at), bool(ok)) for at, ok in seen[scenario.name]]
        verdict = _model().judge(LIMIT, scenario.arrivals, pairs)
        rows.append({"scenario": scenario.name, "admitted": verdict.admitted,
                     "ideal": verdict.ideal, "burst_ms": verdict.burst_ms})  # fmt: skip
    return rows


def run(log: Callable[[str], None], failures: list[str]) -> dict[str, Any]:
    missing = dynamodb_local_missing()
    if missing is not None:
        raise RuntimeError(f"DynamoDB Local is needed: {missing}")
    pythons = {"ours": sys.executable, "published": published_python(log)}
    results: dict[str, Any] = {}
    with running_engine(DYNAMODB_LOCAL) as started:
        url = started.endpoint_url
        table = create_table(url)
        for label, api, reserve in RUNS:
            log(f"[bench] exactness: {label} ...")
            try:
                results[label] = judged(play(pythons[api], url, table, api, reserve))
            except Exception as error:  # the other runs still go; the command fails
                results[label] = f"failed: {type(error).__name__}: {error}"
                failures.append(f"exactness ({label}): {type(error).__name__}: {error}")
                continue
            if api == "ours" and not _model().OVER_ADMITS_AT_THE_TOP:
                for row in results[label]:
                    if row["admitted"] > row["ideal"] + SLACK:
                        failures.append(f"exactness ({label}): {row}")
    return {"limit": "capacity 10, 5 per second", "burst": 40, "results": results}


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "## Exact at the top of the bucket: bursts against an ideal token bucket",
        "",
        f"`benchmarks.exactness`: one limit ({data['limit']}) on DynamoDB Local, one client, real "
        f"time; a burst of {data['burst']} back-to-back acquires after each way of coming "
        "to it. `ideal`: what an ideal token bucket admits, fed the same acquire times.",
        "",
        "| run | scenario | admitted | ideal | burst ms |",
        "|---|---|---|---|---|",
    ]
    for label, rows in data["results"].items():
        if isinstance(rows, str):
            lines.append(f"| {label} | - | {rows} | - | - |")
            continue
        for row in rows:
            lines.append(
                f"| {label} | {row['scenario']} | {row['admitted']} | {row['ideal']} "
                f"| {row['burst_ms']} |"
            )
    return "\n".join(lines) + "\n"


def _measure(
    out_dir: Path, quick: bool, log: Callable[[str], None], failures: list[str]
) -> dict[str, Any]:
    # The same scenarios quick or not: about a minute and a half in all.
    return run(log, failures)


def _render(data: dict[str, Any]) -> str:
    if "results" not in data:
        return f"## Exact at the top of the bucket\n\n{data.get('note', 'no figures')}\n"
    return markdown(data)


SECTION = Section("exactness", _measure, _render)


if __name__ == "__main__":  # python -m benchmarks.exactness
    problems: list[str] = []
    print(markdown(run(print, problems)))
    for problem in problems:
        print(f"failed: {problem}", file=sys.stderr)
    sys.exit(1 if problems else 0)
