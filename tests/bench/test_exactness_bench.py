"""The exactness section of make bench: its table, its judging, and a failed run failing
the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import exactness
from tests._servers import dynamodb_local_missing


def _seen(admit_first: int) -> dict[str, list[list[object]]]:
    """Every scenario's acquires 1 ms apart, the first `admit_first` of each admitted."""
    return {
        s.name: [[a.offset_ms, i < admit_first] for i, a in enumerate(s.arrivals)]
        for s in exactness._scenarios()
    }


def test_judging_counts_only_the_burst_against_the_ideal() -> None:
    rows = exactness.judged(_seen(admit_first=100))  # admits everything
    by = {row["scenario"]: row for row in rows}
    # After sitting idle the burst's 40 acquires (0 ms apart) meet a full bucket of 10.
    assert by["after-idle"]["admitted"] == 40
    assert by["after-idle"]["ideal"] == 10
    assert by["after-idle"]["burst_ms"] == 0


def test_table_has_a_row_per_run_and_scenario() -> None:
    data = {
        "limit": "capacity 10, 5 per second",
        "burst": 40,
        "results": {
            "this library, reserves off": [
                {"scenario": "after-idle", "admitted": 19, "ideal": 11, "burst_ms": 80}
            ],
            "published zae-limiter 0.17.0": "failed: RuntimeError: boom",
        },
    }
    table = exactness.markdown(data)
    assert "| this library, reserves off | after-idle | 19 | 11 | 80 |" in table
    assert "| published zae-limiter 0.17.0 | - | failed: RuntimeError: boom | - | - |" in table


@pytest.mark.engine
def test_a_run_that_fails_fails_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = dynamodb_local_missing()
    assert missing is None, missing
    monkeypatch.setenv("ZAEL_PUBLISHED_PYTHON", str(tmp_path / "no-python"))
    monkeypatch.setattr(exactness, "RUNS", (("published", "published", False),))
    failures: list[str] = []
    parts = exactness.SECTION.run(tmp_path, True, ("exactness",), lambda _: None, failures)
    assert failures and failures[0].startswith("exactness (published)")
    assert "failed:" in parts["exactness"]
