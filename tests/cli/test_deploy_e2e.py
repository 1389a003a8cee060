"""The real `zae-limiter` executable against a moto server on loopback.

This is the documented local workflow: `deploy --no-aggregator` (moto can create the
aggregator but not run it), `status`, `delete`, all over HTTP with --endpoint-url.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._servers import EngineEndpoint, start_moto
from zae_limiter.schema import SCHEMA_VERSION

EXECUTABLE = shutil.which("zae-limiter", path=str(Path(sys.executable).parent))


@pytest.fixture(scope="module")
def moto_server() -> Iterator[EngineEndpoint]:
    endpoint, stop = start_moto()  # stopped by PID: SIGTERM, then SIGKILL after a grace
    try:
        yield endpoint
    finally:
        stop()


def run(endpoint: EngineEndpoint, *args: str) -> subprocess.CompletedProcess[str]:
    assert EXECUTABLE is not None, "the zae-limiter console script is not installed"
    env = {**os.environ, **endpoint.env, "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled"}
    env.pop("AWS_PROFILE", None)
    return subprocess.run(
        [EXECUTABLE, *args, "--endpoint-url", endpoint.url],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_deploy_status_delete_over_http(moto_server: EngineEndpoint) -> None:
    deployed = run(moto_server, "deploy", "-n", "e2e", "--no-aggregator", "-o", "json")
    assert deployed.returncode == 0, deployed.stderr
    result = json.loads(deployed.stdout)
    assert (result["action"], result["status"]) == ("create", "CREATE_COMPLETE")
    assert result["outputs"]["TableName"] == "e2e"

    status = run(moto_server, "status", "-n", "e2e", "-o", "json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["table"]["status"] == "ACTIVE"
    assert report["schema_version"] == SCHEMA_VERSION

    deleted = run(moto_server, "delete", "-n", "e2e", "--yes")
    assert deleted.returncode == 0, deleted.stderr

    gone = run(moto_server, "status", "-n", "e2e")
    assert gone.returncode == 1
    assert gone.stderr.strip().startswith("error: stack 'e2e': does not exist")
    assert "Traceback" not in gone.stderr
