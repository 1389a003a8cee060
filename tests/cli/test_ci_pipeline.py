"""docs/ci.md's pipeline, run as written by bash with the installed `zae-limiter` script,
against a moto server: a first run deploys and applies, a second one finds nothing to do."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC.read_text(), flags=re.M | re.S)


def run_pipeline(tmp_path: Path, endpoint: str, table: str) -> subprocess.CompletedProcess[str]:
    script = "\n".join(blocks("bash")[:2])  # the pipeline, then its audit list
    assert "deploy --plan --detailed-exitcode" in script and "migrate --check" in script
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "AWS_ENDPOINT_URL": endpoint,
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "COLUMNS": "200",
    }
    # The page's table name, made unique so that runs never meet on the shared server.
    script = script.replace("ZAEL_NAME=rate-limits", f"ZAEL_NAME={table}")
    return subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_the_documented_pipeline_runs(tmp_path: Path, moto_http: str) -> None:
    (tmp_path / "limits.yaml").write_text(blocks("yaml")[0])
    table = f"ci-{uuid.uuid4().hex[:8]}"
    first = run_pipeline(tmp_path, moto_http, table)
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"Stack {table} created" in first.stdout
    assert "applied" in first.stdout and "rpm:200/min" in first.stdout
    assert "ci:dev@example.com" in first.stdout  # the audit list at the end of the page
    assert (tmp_path / "stack.yaml").read_text().startswith("AWS")
    assert "0 failed" in first.stdout  # doctor's tally, the pipeline's last step

    second = run_pipeline(tmp_path, moto_http, table)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "stack up to date" in second.stdout and "no changes" in second.stdout
