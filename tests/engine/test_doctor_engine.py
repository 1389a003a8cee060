"""`zae-limiter doctor` against real local engines (moto's server and DynamoDB Local),
run as a user runs it: a healthy table passes every check; a table without a stream, at
an old schema, without an index, or a clock 2 s off, each fails and names its fix."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import SyncRepository, keys, schema, table
from zae_limiter.doctor import CHECKS


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str

    def report(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.stdout)
        return body

    def check(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = next(c for c in self.report()["checks"] if c["name"] == name)
        return found


def doctor(endpoint: EngineEndpoint, *args: str) -> Ran:
    from zae_limiter.cli import main

    env = {**endpoint.env, "COLUMNS": "200"}
    with CliRunner().isolation(env=env) as (out, err, _mixed):
        try:
            main(["doctor", *args])
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
    return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def library_table(endpoint: EngineEndpoint) -> str:
    name = unique_name("doctor")
    SyncRepository.open(name=name, create_table=True).close()
    return name


def hand_made_table(endpoint: EngineEndpoint, params: dict[str, Any]) -> str:
    """A table created by hand from `params`, stamped with this release's version."""
    client = endpoint.client()
    client.create_table(**params)
    client.get_waiter("table_exists").wait(TableName=params["TableName"])
    client.put_item(TableName=params["TableName"], Item=schema.version_item(0, "test"))
    return str(params["TableName"])


def test_a_healthy_table_passes_every_check(engine_env: EngineEndpoint) -> None:
    ran = doctor(engine_env, "--name", library_table(engine_env), "-o", "json")
    assert ran.code == 0, ran.stdout
    report = ran.report()
    assert [c["name"] for c in report["checks"]] == list(CHECKS)
    assert {c["name"]: c["status"] for c in report["checks"]} == {
        **dict.fromkeys(CHECKS, "ok"),
        "alarms": "skip",
        "dashboard": "skip",
    }
    assert report["healthy"] and report["local"] and report["exit_code"] == 0
    clock = ran.check("clock")["details"]
    assert clock["low_ms"] <= 0 <= clock["high_ms"]  # the engine shares our clock
    assert ran.check("alarms")["summary"].startswith("a local engine has no CloudWatch")


def test_the_text_report_lists_every_check_and_the_tally(engine_env: EngineEndpoint) -> None:
    ran = doctor(engine_env, "--name", library_table(engine_env))
    assert ran.code == 0
    for name in CHECKS:
        assert f"│ {name}" in ran.stdout
    assert "8 ok, 0 warnings, 0 failed, 2 skipped" in ran.stdout


def test_a_table_without_a_stream_fails_and_says_how_to_enable_it(
    engine_env: EngineEndpoint,
) -> None:
    params = table.create_table_params(unique_name("doctor"), stream=False)
    ran = doctor(engine_env, "--name", hand_made_table(engine_env, params), "-o", "json")
    assert ran.code == 1
    stream = ran.check("stream")
    assert stream["status"] == "fail" and "no stream" in stream["summary"]
    assert "StreamViewType=NEW_AND_OLD_IMAGES" in stream["fix"]
    assert ran.check("aggregator")["status"] == "skip"


def test_an_old_schema_fails_and_says_migrate(engine_env: EngineEndpoint) -> None:
    name = library_table(engine_env)
    engine_env.client().update_item(
        TableName=name,
        Key=keys.version_key(),
        UpdateExpression="SET #v = :one",
        ExpressionAttributeNames={"#v": keys.A_SCHEMA_VERSION},
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    ran = doctor(engine_env, "--name", name, "-o", "json")
    assert ran.code == 1
    found = ran.check("schema")
    assert found["status"] == "fail" and "table at schema 1" in found["summary"]
    assert found["fix"] == f"run `zae-limiter migrate --name {name}`"


def test_a_missing_index_fails_and_gives_the_command_that_adds_it(
    engine_env: EngineEndpoint,
) -> None:
    params = table.create_table_params(unique_name("doctor"))
    params["GlobalSecondaryIndexes"] = [
        i for i in params["GlobalSecondaryIndexes"] if i["IndexName"] != keys.GSI3
    ]
    params["AttributeDefinitions"] = [
        a for a in params["AttributeDefinitions"]
        if a["AttributeName"] not in (keys.GSI3PK, keys.GSI3SK)
    ]  # fmt: skip
    ran = doctor(engine_env, "--name", hand_made_table(engine_env, params), "-o", "json")
    assert ran.code == 1
    found = ran.check("indexes")
    assert found["status"] == "fail" and found["details"]["problems"] == ["GSI3 is missing"]
    assert '"IndexName":"GSI3"' in found["fix"] and '"ProjectionType":"KEYS_ONLY"' in found["fix"]


@pytest.mark.parametrize("offset", [2000, -2000])
def test_a_clock_two_seconds_off_fails_with_its_offset_and_the_cure(
    engine_env: EngineEndpoint, offset: int
) -> None:
    name = library_table(engine_env)
    ran = doctor(engine_env, "--name", name, "-o", "json", "--clock-offset-ms", str(offset))
    assert ran.code == 1
    found = ran.check("clock")
    assert found["status"] == "fail"
    assert found["details"]["low_ms"] <= offset <= found["details"]["high_ms"]
    assert found["details"]["high_ms"] - found["details"]["low_ms"] < 200
    assert ("ahead of" if offset > 0 else "behind") in found["summary"]
    assert "NTP" in found["fix"]
    failed = [c["name"] for c in ran.report()["checks"] if c["status"] == "fail"]
    assert failed == ["clock"]
