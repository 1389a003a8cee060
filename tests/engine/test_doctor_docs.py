"""docs/doctor.md stays true: its JSON example has the shape of a real report, its list
of checks is the one that runs, and its Python example runs on a real endpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.engine.test_doctor_engine import doctor, hand_made_table, library_table
from zae_limiter import SyncRepository, table
from zae_limiter.doctor import CHECKS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "doctor.md").read_text()


def _block(lang: str) -> str:
    found = re.search(rf"^```{lang}\n(.*?)^```", DOC, re.MULTILINE | re.DOTALL)
    assert found is not None, lang
    return found.group(1)


def test_the_json_example_has_the_shape_of_a_real_report(moto_server: EngineEndpoint) -> None:
    example = json.loads(_block("json"))
    params = table.create_table_params(unique_name("doctor"), stream=False)
    real = doctor(moto_server, "--name", hand_made_table(moto_server, params), "-o", "json")
    report = real.report()
    assert set(example) == set(report)
    assert set(example["counts"]) == set(report["counts"])
    for shown in example["checks"]:
        ran = real.check(shown["name"])
        assert set(shown) == set(ran)
        assert set(shown["details"]) == set(ran["details"]), shown["name"]
    assert example["checks"][0]["fix"] == real.check("stream")["fix"].replace(
        report["table"], "demo"
    )


def test_the_docs_list_every_check_in_the_order_they_run() -> None:
    listed = re.search(r"always in this order:\s*(.*?)\.", DOC, re.DOTALL)
    assert listed is not None
    assert re.findall(r"`(\w+)`", listed.group(1)) == list(CHECKS)
    rows = re.findall(r"^\| `(\w+)` \|", DOC, re.MULTILINE)
    assert rows == list(CHECKS)


def test_the_clock_stats_example_runs(
    moto_server: EngineEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in moto_server.env.items():
        monkeypatch.setenv(name, value)
    repo = SyncRepository.open(name=library_table(moto_server))
    try:
        code = _block("python")
        exec(compile(code, "docs/doctor.md", "exec"), {"repo": repo})
        assert repo.get_clock_stats().answers > 0
    finally:
        repo.close()
