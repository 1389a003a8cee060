"""`zae-limiter aggregator run` and `zae-limiter usage list|summary` on in-process moto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.conftest import Clock
from zae_limiter import Limit, SyncRateLimiter, SyncRepository
from zae_limiter.cli import cli


@pytest.fixture
def table(table_name: str, clock: Clock) -> Iterator[str]:
    from moto import mock_aws

    with mock_aws():
        repo = SyncRepository.open(name=table_name, create_table=True, clock=clock)
        limiter = SyncRateLimiter(repo)
        limiter.set_limits("k1", [Limit.per_minute("rpm", 100)], resource="gpt")
        for _ in range(3):
            with limiter.acquire("k1", "gpt", {"rpm": 2}):
                pass
        yield table_name
        repo.close()


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_run_once_then_list_and_summary(table: str, tmp_path: Path) -> None:
    checkpoint = tmp_path / "pos.json"
    ran = invoke("aggregator", "run", "--once", "-n", table, "--checkpoint", str(checkpoint))
    assert ran.exit_code == 0, ran.output
    assert "0 failed" in ran.output
    saved = json.loads(checkpoint.read_text())
    assert saved["table"] == table and saved["positions"]
    again = invoke("aggregator", "run", "--once", "-n", table, "-o", "json",
                   "--checkpoint", str(checkpoint))  # fmt: skip
    assert json.loads(again.output)["records"] == 0  # resumed after the last record
    listed = invoke("usage", "list", "-n", table, "--entity", "k1", "-o", "json")
    snaps = json.loads(listed.output)["snapshots"]
    assert sorted(s["window"] for s in snaps) == ["daily", "hourly", "monthly"]
    assert all(s["counters"] == {"rpm": 6} and s["total_events"] == 3 for s in snaps)
    summary = json.loads(invoke("usage", "summary", "-n", table, "-r", "gpt", "-o", "json").output)
    assert (summary["counters"], summary["snapshots"], summary["window"]) == (
        {"rpm": 6},
        1,
        "hourly",
    )
    table_view = invoke("usage", "list", "-n", table, "--window", "daily")
    assert "rpm=6" in table_view.output
    future = invoke("usage", "list", "-n", table, "--start", "2999-01", "-o", "json")
    assert json.loads(future.output)["snapshots"] == []


def test_bad_options_are_usage_errors(table: str) -> None:
    assert invoke("aggregator", "run", "--once", "-n", table, "--windows", "weekly").exit_code == 2
    assert invoke("usage", "list", "-n", table, "--window", "yearly").exit_code == 2
    from zae_limiter.cli import main

    with pytest.raises(SystemExit) as done:
        main(["usage", "list", "-n", table, "--start", "not-a-date"])
    assert done.value.code == 2
