"""`zae-limiter deploy / render / status / delete` through click, against moto in process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from click.testing import CliRunner, Result
from moto import mock_aws

from zae_limiter import keys, table
from zae_limiter.cli import cli, main
from zae_limiter.schema import SCHEMA_VERSION

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # moto: "no alarm support"


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws():
        yield


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def as_json(result: Result) -> dict[str, object]:
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_render_prints_the_template_without_aws() -> None:
    result = invoke("render", "--name", "demo", "--no-aggregator")
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.stdout)
    assert data["Resources"]["Table"]["Properties"]["TableName"] == "demo"
    assert "AggregatorFunction" not in data["Resources"]


def test_render_to_file_and_lint(tmp_path: Path) -> None:
    out = tmp_path / "stack.yaml"
    result = invoke("render", "-n", "demo", "-o", str(out), "--lint", "--pitr-recovery-days", "7")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    props = yaml.safe_load(out.read_text())["Resources"]["Table"]["Properties"]
    assert props["PointInTimeRecoverySpecification"]["RecoveryPeriodInDays"] == 7


def test_deploy_update_plan_status_delete(moto: None) -> None:
    created = as_json(invoke("deploy", "-n", "demo", "--no-aggregator", "-o", "json"))
    assert (created["action"], created["status"]) == ("create", "CREATE_COMPLETE")
    assert boto3.client("dynamodb").describe_table(TableName="demo")["Table"]["TableStatus"]

    cfn = boto3.client("cloudformation")
    before = cfn.get_template(StackName="demo")["TemplateBody"]
    planned = as_json(
        invoke("deploy", "-n", "demo", "--no-aggregator", "--namespace-policies", "t1",
               "--plan", "-o", "json")
    )  # fmt: skip
    assert planned["action"] == "plan" and len(planned["changes"]) == 3  # type: ignore[arg-type]
    assert cfn.get_template(StackName="demo")["TemplateBody"] == before
    assert cfn.list_change_sets(StackName="demo")["Summaries"] == []

    updated = as_json(
        invoke("deploy", "-n", "demo", "--no-aggregator", "--namespace-policies", "t1",
               "--yes", "-o", "json")
    )  # fmt: skip
    assert updated["action"] == "update"
    assert cfn.describe_stacks(StackName="demo")["Stacks"][0]["StackStatus"] == "UPDATE_COMPLETE"

    status = as_json(invoke("status", "-n", "demo", "-o", "json"))
    assert status["schema_version"] == SCHEMA_VERSION
    assert status["stack_schema_version"] == SCHEMA_VERSION
    assert status["schema_mismatch"] is None
    assert status["table"]["indexes"] == {i.name: "ACTIVE" for i in table.INDEXES}  # type: ignore[index]
    assert status["aggregator"] == {"function": None, "event_source_mapping": None}

    human = invoke("status", "-n", "demo")
    assert "UPDATE_COMPLETE" in human.stdout and "GSI4" in human.stdout

    deleted = invoke("delete", "-n", "demo", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert "demo" not in boto3.client("dynamodb").list_tables()["TableNames"]


def test_deploy_shows_progress_and_outputs(moto: None) -> None:
    result = invoke("deploy", "-n", "demo", "--no-aggregator")
    assert result.exit_code == 0, result.output
    assert "CREATE_COMPLETE" in result.stderr
    assert "Stack demo created" in result.stdout
    assert "TableArn" in result.stdout
    unchanged = invoke("deploy", "-n", "demo", "--no-aggregator")
    assert "already up to date" in unchanged.stdout


def test_update_asks_first_and_no_changes_nothing(moto: None) -> None:
    invoke("deploy", "-n", "demo", "--no-aggregator", "--yes")
    result = invoke("deploy", "-n", "demo", "--no-aggregator", "--deletion-protection", input="n\n")
    assert result.exit_code == 0, result.output
    assert "Apply these changes?" in result.stderr
    assert "Nothing was changed" in result.stdout
    described = boto3.client("dynamodb").describe_table(TableName="demo")["Table"]
    assert not described.get("DeletionProtectionEnabled", False)


def test_table_only(moto: None) -> None:
    planned = as_json(invoke("deploy", "-n", "plain", "--table-only", "--plan", "-o", "json"))
    assert planned == {"table": "plain", "action": "plan", "exists": False}
    result = as_json(invoke("deploy", "-n", "plain", "--table-only", "-o", "json"))
    assert result["created"] is True and result["version_record_written"] is True
    described = boto3.client("dynamodb").describe_table(TableName="plain")["Table"]
    assert {i["IndexName"] for i in described["GlobalSecondaryIndexes"]} == {
        i.name for i in table.INDEXES
    }
    assert boto3.client("cloudformation").describe_stacks()["Stacks"] == []
    status = as_json(invoke("status", "-n", "plain", "-o", "json"))
    assert status["stack"] == {"status": None, "reason": None}
    assert status["schema_version"] == SCHEMA_VERSION
    assert invoke("delete", "-n", "plain", "--yes").exit_code == 0
    assert boto3.client("dynamodb").list_tables()["TableNames"] == []


def test_delete_asks_unless_yes(moto: None) -> None:
    invoke("deploy", "-n", "demo", "--no-aggregator", "--yes")
    result = CliRunner().invoke(cli, ["delete", "-n", "demo"], input="n\n")
    assert result.exit_code != 0
    assert boto3.client("dynamodb").describe_table(TableName="demo")


def test_errors_are_one_line_without_traceback(
    moto: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as bad_name:
        main(["deploy", "--name", "bad_name", "--no-aggregator"])
    err = capsys.readouterr().err
    assert bad_name.value.code == 2
    assert err.count("\n") == 1 and "invalid name" in err and "Traceback" not in err

    with pytest.raises(SystemExit) as missing:
        main(["status", "--name", "nothing"])
    err = capsys.readouterr().err
    assert missing.value.code == 1
    assert err.strip() == (
        "error: stack 'nothing': does not exist; deploy it with "
        "`zae-limiter deploy --name nothing`"
    )

    with pytest.raises(SystemExit) as no_bucket:
        main(["deploy", "--name", "agg", "--artifact-bucket", "no-such-bucket-zael"])
    err = capsys.readouterr().err
    assert no_bucket.value.code == 1
    assert err.count("\n") == 1 and "no-such-bucket-zael" in err and "Traceback" not in err


def test_status_flags_a_schema_mismatch(moto: None) -> None:
    invoke("deploy", "-n", "demo", "--no-aggregator", "--yes")
    boto3.client("dynamodb").update_item(
        TableName="demo",
        Key=keys.version_key(),
        UpdateExpression=f"SET {keys.A_SCHEMA_VERSION} = :v",
        ExpressionAttributeValues={":v": {"N": str(SCHEMA_VERSION - 1)}},
    )
    status = as_json(invoke("status", "-n", "demo", "-o", "json"))
    assert status["stack_schema_version"] == SCHEMA_VERSION
    assert status["schema_version"] == SCHEMA_VERSION - 1
    assert "zae-limiter migrate" in str(status["schema_mismatch"])
    human = invoke("status", "-n", "demo")
    assert human.exit_code == 0 and "warning:" in human.stderr


def test_plan_on_a_fresh_name_shows_dashboard_and_archive(moto: None) -> None:
    planned = as_json(invoke("deploy", "-n", "fresh", "--plan", "-o", "json"))
    changes = {c["logical_id"]: c for c in planned["changes"]}  # type: ignore[attr-defined]
    assert changes["Dashboard"]["resource_type"] == "AWS::CloudWatch::Dashboard"
    assert changes["AuditArchiveBucket"]["resource_type"] == "AWS::S3::Bucket"
    human = invoke("deploy", "-n", "fresh", "--plan", "--audit-archive-glacier-days", "30")
    assert "AWS::CloudWatch::Dashboard" in human.stdout and "AuditArchiveBucket" in human.stdout
    assert "lifecycle rule to GLACIER_IR after 30 days" in human.stdout
    bare = as_json(
        invoke("deploy", "-n", "fresh", "--plan", "--no-dashboard", "--no-audit-archive",
               "-o", "json")
    )  # fmt: skip
    ids = {c["logical_id"] for c in bare["changes"]}  # type: ignore[attr-defined]
    assert not ids & {"Dashboard", "AuditArchiveBucket"}


def test_render_with_and_without_dashboard() -> None:
    on = yaml.safe_load(invoke("render", "-n", "demo", "--dashboard").stdout)
    off = yaml.safe_load(invoke("render", "-n", "demo", "--no-dashboard").stdout)
    assert on["Resources"]["Dashboard"]["Type"] == "AWS::CloudWatch::Dashboard"
    assert "Dashboard" not in off["Resources"]


def test_deploy_stores_the_bucket_ttl_at_the_system_level(moto: None) -> None:
    bad = invoke("deploy", "-n", "ttl", "--table-only", "--bucket-ttl", "-5")
    assert bad.exit_code == 2 and "--bucket-ttl" in bad.output and "Traceback" not in bad.output
    assert invoke("deploy", "-n", "ttl", "--table-only", "--bucket-ttl", "3600").exit_code == 0
    from zae_limiter import SyncRateLimiter, SyncRepository

    with SyncRepository.open(name="ttl") as repo:
        assert SyncRateLimiter(repo).get_bucket_ttl() == 3600
