"""The `web` section of `make bench` runs end to end (short); its numbers are printed,
never asserted."""

from __future__ import annotations

from pathlib import Path

from benchmarks import web


def test_web_section_measures_both_apps(tmp_path: Path) -> None:
    data = web.run(seconds=0.5, workers=(2,))
    runs = {(r["app"], r["workers"]): r for r in data["results"]}
    assert set(runs) == {("baseline", 2), ("gateway", 2)}
    assert all(r["requests"] > 0 and r["errors"] == 0 for r in runs.values())
    assert [a["workers"] for a in data["added"]] == [2]
    shown = web.markdown(data)
    assert "| gateway | 2 |" in shown and "adds" in shown
    print(shown)


def test_web_section_is_skipped_when_asked(tmp_path: Path) -> None:
    assert web.SECTION.run(tmp_path, True, ("capacity",), print) == {}
