"""The cpu section of make bench: its table, and its run on a moto server (no published
library: the comparison columns then say so with a dash)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import cpu
from benchmarks.engines import MOTO


def test_table_shows_ratios_against_published_and_regular() -> None:
    results = [
        cpu.CpuResult("moto", "sync", "published", 10, 4.0),
        cpu.CpuResult("moto", "sync", "regular", 10, 3.0),
        cpu.CpuResult("moto", "sync", "lean", 10, 1.2),
        cpu.CpuResult("moto", "async", "lean", 10, 2.0),
    ]
    table = cpu.markdown(results, "a note")
    assert "| moto | sync | 4.00 | 3.00 | 1.20 | 0.30 | 0.40 |" in table
    assert "| moto | async | - | - | 2.00 | - | - |" in table
    assert "a note" in table


def test_section_runs_both_paths_and_faces_on_moto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpu, "CALLS", {False: 60, True: 60})
    results = cpu.run(quick=True, published=None, engines=(MOTO,))
    by = {(r.face, r.path): r.cpu_ms for r in results}
    assert set(by) == {(f, p) for f in cpu.FACES for p in ("regular", "lean")}
    assert all(ms > 0 for ms in by.values())  # figures only: the report compares them
    for r in results:  # the figure shown is the median round's
        assert len(r.rounds) == cpu.ROUNDS
        assert r.cpu_ms == sorted(r.rounds)[len(r.rounds) // 2]


def test_lean_call_alone_runs_the_hot_paths_update_on_moto(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import lean_call

    lean_call.main([MOTO, "40"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["moto sync", "moto async"]
    assert all(len(line.split(": ")[-1].split()) == 3 for line in lines)  # three rounds


def test_library_path_replays_a_real_response_and_counts_the_librarys_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import library_path

    assert library_path.main(["--acquires", "50"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| o")]
    assert [row.split(" | ")[0] for row in rows] == ["| off", "| on"]
    # Every acquire ran the library's code (a replay that short-circuited it would count
    # almost nothing: a reserve hit is a dozen-odd calls, a write about a hundred since
    # the per-request path was cut), and the figures are ordered.
    floors = {"| off": 50, "| on": 5}
    for row in rows:
        calls, best, median = (float(cell) for cell in row.strip(" |").split(" | ")[1:])
        assert calls > floors[row.split(" | ")[0]]
        assert 0 < best <= median


def test_the_command_measures_the_lean_path_alone_on_one_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """How builds are compared (docs/performance.md): the lean path, one engine, no
    published library; the regular and published columns are dashes."""
    monkeypatch.setattr(cpu, "CALLS", {False: 60, True: 60})
    assert cpu.main(["--quick", "--engine", MOTO, "--lean-only", "--no-published"]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith(f"| {MOTO} |")]
    assert len(rows) == len(cpu.FACES)
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2:4] == ["-", "-"] and float(cells[4]) > 0
    assert "--no-published" in table


def test_the_command_refuses_an_unknown_engine(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cpu.main(["--engine", "dynamo"])
    assert exited.value.code == 2
    assert "invalid choice: 'dynamo'" in capsys.readouterr().err
