"""CI cannot skip: with ZAEL_REQUIRE_ENGINES=1 every skip becomes an error naming what is
missing; without it, skips stay skips. Run in a child pytest on a scratch test file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRATCH = '''
import pytest

@pytest.fixture
def dynamodb_local():
    pytest.skip("DynamoDB Local not installed: needs java 17")

def test_on_the_engine(dynamodb_local):
    pass

@pytest.mark.skipif(True, reason="locust is not installed")
def test_marked():
    pass

def test_inside():
    pytest.skip("no moto server")

@pytest.mark.xfail(reason="a known limit", strict=True)
def test_known_limit():
    assert False

def test_plain():
    pass
'''


def run(
    tmp_path: Path, require: str | None, body: str = SCRATCH
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_scratch.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ZAEL_REQUIRE_ENGINES", None)
    if require is not None:
        env["ZAEL_REQUIRE_ENGINES"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests._require_engines", "-p", "no:cacheprovider",
         "-rsE", "-q", "-o", "addopts=", "test_scratch.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_required_turns_every_skip_into_an_error_naming_the_component(tmp_path: Path) -> None:
    result = run(tmp_path, "1")
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert "1 failed, 1 passed, 1 xfailed, 2 errors" in out, out
    assert "required component is missing: DynamoDB Local not installed: needs java 17" in out
    assert "required component is missing: locust is not installed" in out
    assert "required component is missing: no moto server" in out
    assert "skipped" not in out.splitlines()[-1]


def test_a_module_level_skip_is_an_error_too(tmp_path: Path) -> None:
    body = 'import pytest\npytest.importorskip("no_such_module_zael")\ndef test_x(): pass\n'
    result = run(tmp_path, "1", body)
    assert result.returncode != 0
    assert "required component is missing" in result.stdout
    assert "no_such_module_zael" in result.stdout


def test_without_it_skips_stay_skips_and_are_listed(tmp_path: Path) -> None:
    for require in (None, "0"):
        result = run(tmp_path, require)
        assert result.returncode == 0, result.stdout
        assert "1 passed, 3 skipped, 1 xfailed" in result.stdout, result.stdout
        assert "SKIPPED [1] test_scratch.py" in result.stdout
