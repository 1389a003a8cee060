"""`zae-limiter local up --regions`: an engine process per region and the replicator
process, driven through the CLI as a user does (private state dir, lag 100 ms)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from click.testing import CliRunner, Result

from zae_limiter import table
from zae_limiter.cli import cli
from zae_limiter.local import regions as regions_api
from zae_limiter.local.process import pid_alive

pytestmark = pytest.mark.engine

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ZAEL_LOCAL_STATE_DIR", str(tmp_path))
    yield tmp_path
    regions_api.down_regions(grace=1.0)  # whatever a failed test left running


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["local", *args])


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def client(env: dict[str, str]) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        config=Config(account_id_endpoint_mode="disabled"),
    )


def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.05)


def test_up_partition_status_env_down(state_dir: Path) -> None:
    up = ok_json(invoke("up", "--regions", ",".join(REGIONS), "--lag-ms", "100", "-o", "json"))
    assert up["running"] and up["lag_ms"] == 100 and up["partitioned"] == []
    ports = {r: s["port"] for r, s in up["regions"].items()}
    assert set(ports) == set(REGIONS) and len(set(ports.values())) == 3  # a process each
    pids = [s["pid"] for s in up["regions"].values()] + [up["replicator"]["pid"]]

    envs = {r: ok_json(invoke("env", "--region", r, "-o", "json")) for r in REGIONS}
    assert {r: e["AWS_REGION"] for r, e in envs.items()} == {r: r for r in REGIONS}
    ddb = {r: client(e) for r, e in envs.items()}
    for region in REGIONS:
        ddb[region].create_table(**table.create_table_params("glob"))

    def value(region: str, key: str) -> str | None:
        item = ddb[region].get_item(
            TableName="glob", Key={"PK": {"S": key}, "SK": {"S": "#S"}}
        ).get("Item")
        return None if item is None else str(item["v"]["S"])

    def put(region: str, key: str, v: str) -> None:
        ddb[region].put_item(TableName="glob",
                             Item={"PK": {"S": key}, "SK": {"S": "#S"}, "v": {"S": v}})  # fmt: skip

    put("us-east-1", "k", "1")
    eventually(lambda: value("eu-west-1", "k") == value("ap-southeast-1", "k") == "1")

    cut = invoke("partition", "--region", "eu-west-1", "on")
    assert cut.exit_code == 0 and "partitioned now: eu-west-1" in cut.output
    time.sleep(0.2)
    put("us-east-1", "k", "2")
    eventually(lambda: value("ap-southeast-1", "k") == "2")
    time.sleep(0.5)
    assert value("eu-west-1", "k") == "1"
    status = ok_json(invoke("status", "-o", "json"))
    assert status["partitioned"] == ["eu-west-1"]
    eventually(lambda: ok_json(invoke("status", "-o", "json"))["backlog"].get(
        "us-east-1->eu-west-1") == 1)  # fmt: skip
    human = invoke("status")
    assert "eu-west-1" in human.output and "PARTITIONED" in human.output
    assert "replicated: glob (ap-southeast-1, eu-west-1, us-east-1)" in human.output
    assert "waiting: us-east-1->eu-west-1 1" in human.output
    assert invoke("partition", "--region", "eu-west-1", "off").exit_code == 0
    eventually(lambda: value("eu-west-1", "k") == "2")

    assert ok_json(invoke("lag", "300", "-o", "json"))["lag_ms"] == 300
    assert invoke("env").exit_code != 0  # which region? it must be said

    down = invoke("down")
    assert down.exit_code == 0 and "stopped the replicator" in down.output
    assert not any(pid_alive(pid) for pid in pids)
    assert invoke("status").exit_code == 1


def test_a_region_that_fails_to_start_leaves_nothing_running(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_up = regions_api.instances.up
    started: list[int] = []

    def up_then_fail(engine: str, port: int | None, instance: str) -> Any:
        if instance.endswith("eu-west-1"):
            raise regions_api.LocalEngineError("no engine for you")
        result = real_up(engine, port, instance)
        started.append(result.state.pid)
        return result

    monkeypatch.setattr(regions_api.instances, "up", up_then_fail)
    with pytest.raises(regions_api.LocalEngineError, match="no engine for you"):
        regions_api.up_regions("moto", ("us-east-1", "eu-west-1"))
    assert started and not any(pid_alive(pid) for pid in started)
    assert regions_api.read_group() is None
