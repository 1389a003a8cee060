"""The benchmark report's capacity figures are the budget table, path by path.

The capacity section runs on DynamoDB Local (skipped, naming it, when Java or the jar is
missing; CI installs both with .ci/install-dynamodb-local). `EXPECTED` in
`benchmarks.capacity` is DESIGN.md section 4's table as the library implements
it: any difference fails. Timings are reported by the benchmark, never asserted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import capacity, suite
from benchmarks.capacity import EXPECTED, MEASURED, MODELLED, Budget, CapacityRun
from benchmarks.cost import per_million
from benchmarks.report import JSON_NAME, MARKDOWN_NAME, Report
from tests._servers import DYNAMODB_LOCAL_SKIP, dynamodb_local_missing

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def measured() -> CapacityRun:
    missing = dynamodb_local_missing()
    if missing is not None:
        pytest.skip(f"{DYNAMODB_LOCAL_SKIP} ({missing})")
    return capacity.run("dynamodb-local")


@pytest.fixture(scope="module")
def written(measured: CapacityRun, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    report = Report(command="pytest", quick=True, capacity=measured)
    out = tmp_path_factory.mktemp("bench")
    report.write(out)
    return {
        "md": (out / MARKDOWN_NAME).read_text(),
        "json": json.loads((out / JSON_NAME).read_text()),
    }


def test_every_path_is_measured_on_dynamodb_local(measured: CapacityRun) -> None:
    assert measured.source == MEASURED
    assert [p.budget.key for p in measured.paths] == [b.key for b in EXPECTED]


@pytest.mark.parametrize("budget", EXPECTED, ids=[b.key for b in EXPECTED])
def test_report_capacity_equals_the_budget(
    written: dict[str, object], budget: capacity.PathBudget
) -> None:
    paths = {p["key"]: p for p in written["json"]["capacity"]["paths"]}  # type: ignore[index]
    got = paths[budget.key]
    assert Budget(**got["measured"]) == budget.library, (budget.title, got["ops"])
    assert got["matches"] is True


def test_library_beats_the_design_where_it_says_so(measured: CapacityRun) -> None:
    refill = next(p for p in measured.paths if p.budget.key == "refill_helps")
    assert refill.measured == Budget(1, 0, 1)
    assert refill.budget.design == Budget(3, 1, 2)
    first = next(p for p in measured.paths if p.budget.key == "first_acquire")
    assert first.measured.round_trips == 2 and first.ops == ("batch_get_item", "put_item")


def test_cost_per_million_comes_from_the_measured_capacity(written: dict[str, object]) -> None:
    data = written["json"]
    costs = data["cost_per_million"]["paths"]  # type: ignore[index]
    for budget in EXPECTED:
        assert costs[budget.key] == pytest.approx(
            per_million(budget.library.rcu, budget.library.wcu)
        )
    assert costs["speculative_success"] == pytest.approx(0.625)
    assert "| speculative success | 0 | 1 | $0.625 |" in str(written["md"])


def test_markdown_names_the_source_and_every_path(written: dict[str, object]) -> None:
    md = str(written["md"])
    assert f"## Capacity per acquire path: {MEASURED}" in md
    for budget in EXPECTED:
        assert f"| {budget.title} | {budget.library.round_trips} |" in md
    assert "NO (expected" not in md


def test_modelled_capacity_on_moto_agrees_with_the_budget() -> None:
    run = capacity.run("moto")
    assert run.source == MODELLED
    assert run.mismatches == []


def test_hot_entity_is_reported_not_available_when_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmarks

    monkeypatch.setitem(sys.modules, "benchmarks.hot_entity", None)
    monkeypatch.delattr(benchmarks, "hot_entity", raising=False)
    result, note = suite.hot_entity_section(tmp_path, quick=True)
    assert result is None and note.startswith("not available")
    report = Report(command="pytest", quick=True, hot_entity_note=note)
    assert "## Hot entity\n\nnot available" in report.to_markdown()


def test_a_failing_section_fails_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import __main__ as bench_main
    from benchmarks import hot_entity

    def broken(**_kwargs: object) -> None:
        raise RuntimeError("the engine went away")

    monkeypatch.setattr(hot_entity, "run", broken)
    others = [arg for s in suite.SECTIONS if s != "hot-entity" for arg in ("--skip", s)]
    assert bench_main.main(["--out", str(tmp_path), *others]) == 1
    assert "hot-entity: RuntimeError: the engine went away" in capsys.readouterr().err
    written = json.loads((tmp_path / JSON_NAME).read_text())
    assert written["failures"] == ["hot-entity: RuntimeError: the engine went away"]
    assert "## Failed\n\n- hot-entity: RuntimeError" in (tmp_path / MARKDOWN_NAME).read_text()
