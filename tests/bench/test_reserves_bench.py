"""The `reserves` section of `make bench`: its ideal-bucket arithmetic, and one quick run
whose report must have every part (structure only: figures are printed, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import reserves, suite
from benchmarks.reserves_shared import ArrivalLog, compare, ideal, poisson_schedule
from zae_limiter import Limit

TEN_PER_SECOND = Limit.custom("rps", 5, 10, 1)


def test_the_ideal_bucket_admits_its_capacity_then_its_refill() -> None:
    burst = [1_000_000] * 8  # eight arrivals in one millisecond: only the capacity passes
    assert ideal(burst, TEN_PER_SECOND) == [True] * 5 + [False] * 3
    # 100 ms later one token has come back, not two.
    assert ideal([*burst, 1_000_100, 1_000_100], TEN_PER_SECOND)[-2:] == [True, False]


def test_compare_counts_what_a_limiter_admitted_beyond_the_ideal() -> None:
    greedy = ArrivalLog(10.0, [(1_000_000 + i, 1) for i in range(7)])
    result = compare([greedy], TEN_PER_SECOND)
    assert (result["admitted"], result["ideal"]) == (7, 5)
    assert result["worst_cumulative_excess"] == 2
    assert result["per_second"] == [{"second": 0, "offered": 7, "admitted": 7, "ideal": 5}]


def test_compare_merges_clients_in_time_order() -> None:
    late = ArrivalLog(1.0, [(2_000, 1)])
    early = ArrivalLog(1.0, [(1_000, 0), (3_500, -1)])
    result = compare([late, early], TEN_PER_SECOND)
    assert result["arrivals"] == 3 and result["failed"] == 1
    assert [row["second"] for row in result["per_second"]] == [0, 1, 2]


def test_poisson_schedule_is_ordered_and_reproducible() -> None:
    schedule = poisson_schedule((5.0, 50.0), 2.0, seed=3)
    assert schedule == sorted(schedule) == poisson_schedule((5.0, 50.0), 2.0, seed=3)
    assert {index for _, index in schedule} == {0, 1}
    assert all(0 <= offset < 2.0 for offset, _ in schedule)


def test_the_section_is_registered_and_skippable(tmp_path: Path) -> None:
    assert "reserves" in suite.SECTIONS
    assert reserves.SECTION.run(tmp_path, True, ("capacity",), print) == {}


@pytest.mark.slow
def test_a_quick_run_reports_every_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every part runs and reports; the sizes are `make bench`'s to measure with, and
    # smaller ones show the same parts and the same shape (the quick run took 38 s here).
    monkeypatch.setattr(reserves, "ACQUIRES", {False: reserves.ACQUIRES[False], True: 30})
    monkeypatch.setattr(reserves, "EXACTNESS", {False: reserves.EXACTNESS[False], True: (2, 50)})
    monkeypatch.setattr(reserves, "SHARED_SECONDS", {False: 20.0, True: 1.0})
    monkeypatch.setattr(reserves, "HOT", {False: reserves.HOT[False], True: (1.0, 4, 1)})
    monkeypatch.setattr(reserves, "COST_ACQUIRES", {False: 3000, True: 30})
    shown = reserves.SECTION.run(tmp_path, True, ("reserves",), lambda _line: None)
    data = json.loads((tmp_path / "reserves.json").read_text())
    markdown = shown["reserves"]
    for heading in (
        "## Token reserves (quick)",
        "### One client, one entity",
        "### Exactness at the limit",
        "### Under-admission against an ideal token bucket (DynamoDB Local, real time)",
        "### Under-admission against an ideal token bucket (DynamoDB Local, simulated clock)",
        "### Hot entity behind the partition emulator",
        "### Cost per million acquires on the hot path",
    ):
        assert heading in markdown
    runs = data["one_client"]
    assert {(r["face"], r["reserve"]) for r in runs} == {
        ("sync", True),
        ("sync", False),
        ("async", True),
        ("async", False),
    }
    assert all(r["acquires"] == reserves.ACQUIRES[True] for r in runs)
    if "dynamodb_local" in data:  # not installed here: said so, in place of the parts
        assert "not run" in data["dynamodb_local"]["note"]
        return
    assert [case["cascade"] for case in data["exactness"]] == [False, True]
    for key in ("under_admission", "under_admission_simulated"):
        assert {"arrivals", "admitted", "ideal", "per_second"} <= set(data[key])
    assert [row["rate"] for row in data["cost"]] == list(reserves.COST_RATES)
    assert "probe" in data["hot_entity"] or "note" in data["hot_entity"]
