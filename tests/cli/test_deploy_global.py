"""`deploy`, `render` and `status` for a global table (--regions), against moto in process.

moto's CloudFormation has no AWS::DynamoDB::GlobalTable and its DynamoDB keeps no
replicas, so: templates are checked by rendering and cfn-lint, plans by `--plan` on a
name with no stack, and replicas against a recorded DescribeTable answer
(tests/infra/recorded/, written in the shape of AWS's, see its _comment).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from click.testing import CliRunner, Result
from moto import mock_aws

from zae_limiter.cli import cli, main
from zae_limiter.infra import replicas
from zae_limiter.infra.replicas import region_change, replicas_of

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # moto: "no alarm support"

# The package re-exports a function named status over the module of that name.
status = importlib.import_module("zae_limiter.infra.status")

REGIONS = "us-east-1,eu-west-1,ap-southeast-1"
RECORDED = Path(__file__).parents[1] / "infra" / "recorded" / "describe_table_global.json"


def recorded_table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(RECORDED.read_text())["Table"]
    return table


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws():
        yield


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def failing(*args: str) -> tuple[int, str]:
    """Run as a user does (`main()`: errors become one line and an exit code)."""
    with CliRunner().isolation() as (_out, err, _mixed):
        try:
            main(list(args))
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
    return code, err.getvalue().decode()


def test_render_with_regions_is_a_lint_clean_global_table() -> None:
    result = invoke("render", "-n", "demo", "--regions", REGIONS, "--lint")
    assert result.exit_code == 0, result.output
    table = yaml.safe_load(result.stdout)["Resources"]["Table"]
    assert table["Type"] == "AWS::DynamoDB::GlobalTable"
    assert [r["Region"] for r in table["Properties"]["Replicas"]] == REGIONS.split(",")


def test_render_aggregator_only_renders_a_regions_stack() -> None:
    result = invoke("render", "-n", "demo", "--regions", REGIONS,
                    "--aggregator-only", "eu-west-1", "--lint")  # fmt: skip
    assert result.exit_code == 0, result.output
    res = yaml.safe_load(result.stdout)["Resources"]
    assert "Table" not in res and "AggregatorEventSourceMapping" in res
    code, err = failing("render", "-n", "demo", "--regions", REGIONS,
                        "--aggregator-only", "us-east-1")  # fmt: skip
    assert code != 0 and "not one of the other replica regions" in err


def test_plan_shows_the_replicas_and_every_regions_stack(moto: None) -> None:
    human = invoke("deploy", "-n", "demo", "--regions", REGIONS, "--plan")
    assert human.exit_code == 0, human.output
    assert "AWS::DynamoDB::GlobalTable" in human.stdout
    assert "Replicas would be added: us-east-1, eu-west-1, ap-southeast-1" in human.stdout
    for region in ("eu-west-1", "ap-southeast-1"):
        assert f"Plan to create stack demo in {region}" in human.stdout
    planned = json.loads(invoke("deploy", "-n", "demo", "--regions", REGIONS, "--plan",
                                "-o", "json").stdout)  # fmt: skip
    assert [r["region"] for r in planned["regional_stacks"]] == ["eu-west-1", "ap-southeast-1"]
    mapping = {c["logical_id"] for c in planned["regional_stacks"][0]["changes"]}
    assert "AggregatorEventSourceMapping" in mapping


def test_plan_shows_a_replica_added_and_one_removed(
    moto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deployed: us-east-1 (asked), eu-west-1 and ap-southeast-1 (recorded answer).
    monkeypatch.setattr(replicas, "describe_table", lambda aws, name: recorded_table())
    result = invoke("deploy", "-n", "demo", "--regions", "us-east-1,eu-west-1,eu-central-1",
                    "--plan", "--detailed-exitcode")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "Replicas would be added: eu-central-1" in result.stdout
    assert "Replicas would be removed: ap-southeast-1" in result.stdout


def test_region_change_and_replicas_of_the_recorded_answer() -> None:
    found = replicas_of(recorded_table(), "us-east-1")
    assert [(r.region, r.status) for r in found] == [
        ("us-east-1", "ACTIVE"), ("eu-west-1", "ACTIVE"), ("ap-southeast-1", "CREATING"),
    ]  # fmt: skip
    assert found[2].detail == "Replica is being created"
    assert replicas_of({"TableStatus": "ACTIVE"}, "us-east-1") == ()
    change = region_change(("a-b-1", "c-d-1"), ("c-d-1", "e-f-1"))
    assert (change.added, change.removed) == (("e-f-1",), ("a-b-1",))
    assert not region_change(("a-b-1",), ("a-b-1",))


def test_status_shows_each_replica(moto: None, monkeypatch: pytest.MonkeyPatch) -> None:
    deployed = invoke("deploy", "-n", "demo", "--no-aggregator", "--yes")
    assert deployed.exit_code == 0, deployed.output
    real = status.describe_table

    def with_replicas(aws: Any, name: str) -> dict[str, Any] | None:
        described = real(aws, name)
        assert described is not None
        return {**described, "Replicas": recorded_table()["Replicas"]}

    monkeypatch.setattr(status, "describe_table", with_replicas)
    shown = json.loads(invoke("status", "-n", "demo", "-o", "json").stdout)
    assert shown["replicas"] == [
        {"region": "us-east-1", "status": "ACTIVE", "detail": None},
        {"region": "eu-west-1", "status": "ACTIVE", "detail": None},
        {"region": "ap-southeast-1", "status": "CREATING", "detail": "Replica is being created"},
    ]
    human = invoke("status", "-n", "demo")
    assert "replica ap-southeast-1" in human.stdout and "CREATING" in human.stdout
    monkeypatch.setattr(status, "describe_table", real)
    assert "replicas" not in json.loads(invoke("status", "-n", "demo", "-o", "json").stdout)


def test_deploy_refuses_what_cloudformation_cannot_do(moto: None) -> None:
    code, err = failing("deploy", "-n", "demo", "--regions", REGIONS, "--region", "eu-west-1")
    assert code != 0 and "pass --region us-east-1" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert invoke("deploy", "-n", "demo", "--no-aggregator", "--yes").exit_code == 0
    code, err = failing("deploy", "-n", "demo", "--no-aggregator", "--regions", REGIONS, "--yes")
    assert code != 0 and "would replace the table and lose its items" in err


def test_delete_takes_the_other_regions_stacks_first(
    moto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke("deploy", "-n", "demo", "--no-aggregator", "--yes").exit_code == 0
    # A regional stack in eu-west-1 (alarms only: moto runs no GlobalTable, and no Lambda).
    regional = invoke("render", "-n", "demo", "--regions", "us-east-1,eu-west-1",
                      "--no-aggregator", "--aggregator-only", "eu-west-1").stdout  # fmt: skip
    eu = boto3.client("cloudformation", region_name="eu-west-1")
    eu.create_stack(StackName="demo", TemplateBody=regional)
    monkeypatch.setattr(replicas, "describe_table", lambda aws, name: recorded_table())
    assert eu.describe_stacks(StackName="demo")["Stacks"]
    assert invoke("delete", "-n", "demo", "--yes").exit_code == 0
    with pytest.raises(eu.exceptions.ClientError, match="does not exist"):
        eu.describe_stacks(StackName="demo")
