"""`python -m zae_limiter.demo`: the whole story end to end, shortened to 3 seconds of load."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from typing import Any

import pytest

from zae_limiter.demo.app import parse_args

DEMO_TIMEOUT = 150


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="module")
def demo_run() -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "ZAEL_NAME", "ZAEL_NAMESPACE"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "zae_limiter.demo", "--seconds", "3"],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
        env=env,
        check=False,
    )


@pytest.mark.slow
def test_demo_exits_cleanly(demo_run: subprocess.CompletedProcess[str]) -> None:
    assert demo_run.returncode == 0, demo_run.stdout[-3000:] + demo_run.stderr[-3000:]
    assert "Traceback" not in demo_run.stderr


@pytest.mark.slow
def test_demo_shows_a_rejection_with_retry_after(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    found = re.search(r"rejected: RateLimitExceeded, retry after (\d+\.\d+)s", demo_run.stdout)
    assert found, demo_run.stdout
    assert float(found.group(1)) > 0
    assert '"retry_after_seconds"' in demo_run.stdout  # the as_dict() body


@pytest.mark.slow
def test_demo_one_call_shows_in_the_cascade_parent(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    found = re.search(r"acme \(cascade parent\) tpm available (\d+) -> (\d+)", demo_run.stdout)
    assert found, demo_run.stdout
    before, after = int(found.group(1)), int(found.group(2))
    # The call's 320 tokens, less what the parent's slow daily budget refilled meanwhile.
    assert before - 320 <= after < before


@pytest.mark.slow
def test_demo_hot_entity_doubles_its_shards(demo_run: subprocess.CompletedProcess[str]) -> None:
    counts = [int(c) for c in re.findall(r"globex-batch shard count: (\d+)", demo_run.stdout)]
    assert counts, demo_run.stdout
    assert counts[-1] >= 2
    assert re.search(r"final shard count of globex-batch\W+(\d+)", demo_run.stdout)


@pytest.mark.slow
def test_demo_workload_table_adds_up_to_its_totals(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    """The live table is drawn last after the workers stopped: calls in flight at the stop
    are in it, as they are in the totals line below it."""
    step4 = demo_run.stdout.split("4. live workload", 1)[1].split("workload: ", 2)
    rows = re.findall(r"│ (\S+)\s+│\s+(\d+) │\s+(\d+) │", step4[1])
    totals = re.search(r"^(\d+) admitted, (\d+) rejected", step4[2])
    assert rows and totals, demo_run.stdout
    assert sum(int(admitted) for _e, admitted, _r in rows) == int(totals.group(1))
    assert sum(int(rejected) for _e, _a, rejected in rows) == int(totals.group(2))


@pytest.mark.slow
def test_demo_stops_its_engine(demo_run: subprocess.CompletedProcess[str]) -> None:
    found = re.search(r"moto server on http://127\.0\.0\.1:\d+ \(pid (\d+)\)", demo_run.stdout)
    assert found, demo_run.stdout
    assert not _pid_alive(int(found.group(1)))
    assert "engine stopped" in demo_run.stdout


def test_seconds_must_be_positive() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--seconds", "0"])
    assert parse_args(["--seconds", "2.5", "--quiet"]).seconds == 2.5


def _quiet_view() -> tuple[Any, io.StringIO]:
    from rich.console import Console

    from zae_limiter.demo.view import View

    buffer = io.StringIO()
    return View(Console(file=buffer, width=200), quiet=True), buffer


def test_a_failed_step_makes_the_demo_exit_non_zero() -> None:
    from zae_limiter.demo.app import verdict

    out, buffer = _quiet_view()
    assert verdict(out, []) == 0
    assert verdict(out, ["6. usage from the aggregator"]) == 1
    assert "these steps failed: 6. usage from the aggregator" in buffer.getvalue()


def test_steps_five_and_six_report_failure(moto_http: str, monkeypatch: Any) -> None:
    """On an engine without the demo's table, the CLI commands of steps 5 and 6 fail for
    real (no table): both steps say so and return False, which `verdict` turns into 1."""
    from zae_limiter.demo import app
    from zae_limiter.demo.workload import Stats

    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.setattr(app, "TABLE", f"missing-{os.getpid()}")
    out, buffer = _quiet_view()
    assert app.show_shards(out, moto_http, Stats()) is False
    assert app.show_usage(out, moto_http) is False
    assert "`aggregator run --once` failed" in buffer.getvalue()
