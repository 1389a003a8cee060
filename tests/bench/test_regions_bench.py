"""`python -m benchmarks regions` judges its runs (benchmarks/regional_bench.py): it exits 1
when a shares run admits past one ideal bucket of the whole limit, when the unpartitioned
shares run serves under 95% outside the shifts, or when acquires failed; and its report
carries the share sum, the parts in flight and each region's releases and absorptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.regional import Analysis, Record, Run, analyse
from benchmarks.regional_bench import REGIONS, report, scenario

Runs = list[tuple[Analysis, list[str]]]


def _analysis(mode: str, over: float = 0.0, served: float = 0.99) -> Analysis:
    row: dict[str, Any] = {
        "second": 7, "offered": 300, "admitted": dict.fromkeys(REGIONS, 100),
        "offered_by_region": dict.fromkeys(REGIONS, 100), "shares": dict.fromkeys(REGIONS, 0.3),
        "share_sum": 0.9, "in_flight": 0.1, "released": dict.fromkeys(REGIONS, 0.0),
        "absorbed": {**dict.fromkeys(REGIONS, 0.0), "ap-southeast-1": 0.25},
    }  # fmt: skip
    return Analysis(
        mode=mode, offered=300, admitted=300, over_admitted=over, served=served,
        worst_second=0.9, p50_ms=0.0, p99_ms=1.0, per_second=[row],
    )  # fmt: skip


def test_a_clean_run_exits_0_and_reports_the_moves(tmp_path: Path) -> None:
    runs: Runs = [(_analysis("shares"), []), (_analysis("shares + partition", served=0.5), [])]
    assert report(runs, tmp_path, 90, 1000, 300) == 0  # the partition's share is not judged
    text = (tmp_path / "regions.md").read_text()
    assert "| shares held | in flight |" in text
    assert "| 7 | 300 | 300 | 90% | 10% | 30% / 100 / 100 / 0% / 0% |" in text
    assert "30% / 100 / 100 / 0% / 25% |" in text  # ap-southeast-1 absorbed 25%
    assert (tmp_path / "regions-shares.svg").exists()


def test_a_run_past_the_ideal_bucket_or_under_95_percent_exits_1(tmp_path: Path) -> None:
    over: Runs = [(_analysis("shares + partition", over=2.0), [])]
    assert report(over, tmp_path, 90, 1000, 300) == 1
    assert report([(_analysis("shares", served=0.94), [])], tmp_path, 90, 1000, 300) == 1
    failed: Runs = [(_analysis("home"), ["us-east-1: EndpointConnectionError"] * 10)]
    assert report(failed, tmp_path, 90, 1000, 300) == 1


def test_the_analysis_sums_shares_and_counts_what_moved() -> None:
    run = Run(scenario(30, 1000, False), "shares", started_ms=0)
    run.records = [Record("us-east-1", 8_500, True, 1.0)]
    for region in REGIONS:
        run.shares[(7, region)] = run.shares[(8, region)] = 300_000
        run.moved[(7, region)] = (0, 0)
    run.moved[(8, "us-east-1")] = (50_000, 0)  # gave 5% in second 8, not absorbed yet
    run.moved[(8, "eu-west-1")] = (0, 0)
    run.moved[(8, "ap-southeast-1")] = (0, 0)
    run.shares[(8, "us-east-1")] = 250_000
    row = analyse(run).per_second[8]
    assert row["share_sum"] == 0.85 and row["in_flight"] == 0.05
    assert row["released"]["us-east-1"] == 0.05 and row["absorbed"]["eu-west-1"] == 0.0
