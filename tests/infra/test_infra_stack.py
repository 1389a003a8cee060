"""Stack operations and the table-only deploy against moto, in process.

moto creates the aggregator's Lambda and mapping but cannot run them (no Docker), does
not roll back a failed stack, and leaves CloudWatch alarms out; the rollback path is
checked through `failure_reason` on events as CloudFormation reports them.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from moto import mock_aws

from tests.infra._helpers import VARIANTS
from zae_limiter import keys, schema, table
from zae_limiter.infra import Aws, Deployer, StackNotFoundError, StackOptions
from zae_limiter.infra.options import AGGREGATOR_HANDLER
from zae_limiter.infra.render import render_template
from zae_limiter.infra.stack import StackEvent, failure_reason
from zae_limiter.infra.table_only import deploy_table_only, write_version_record

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # moto: "no alarm support"


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        yield Aws(region="us-east-1")


def test_create_update_unchanged_and_delete(aws: Aws) -> None:
    seen: list[StackEvent] = []
    deployer = Deployer(aws, poll_seconds=0.01, on_event=seen.append)
    created = deployer.deploy(StackOptions("demo", aggregator=False))
    assert (created.action, created.status, created.version_written) == (
        "create", "CREATE_COMPLETE", True,
    )  # fmt: skip
    assert created.outputs["TableName"] == "demo"
    assert any(e.status == "CREATE_COMPLETE" for e in seen)

    again = deployer.deploy(StackOptions("demo", aggregator=False))
    assert (again.action, again.version_written) == ("unchanged", False)

    updated = deployer.deploy(StackOptions("demo", aggregator=False, namespace_policies=("t1",)))
    assert updated.action == "update"
    assert {c.action for c in updated.changes} == {"Add"}
    assert len(updated.changes) == 3
    names = {p["PolicyName"] for p in aws.client("iam").list_policies(Scope="Local")["Policies"]}
    assert {"demo-ns-t1-acquire", "demo-ns-t1-read-only", "demo-ns-t1-full-access"} <= names

    assert deployer.delete("demo") == "DELETE_COMPLETE"
    assert deployer.stacks.describe("demo") is None
    with pytest.raises(StackNotFoundError, match="does not exist"):
        deployer.delete("demo")


def test_plan_changes_nothing(aws: Aws) -> None:
    deployer = Deployer(aws, poll_seconds=0.01)
    planned = deployer.deploy(StackOptions("demo", aggregator=False), plan=True)
    assert planned.action == "plan" and planned.status is None
    assert {c.logical_id for c in planned.changes} >= {"Table", "AcquirePolicy"}
    assert deployer.stacks.describe("demo") is None
    assert aws.client("dynamodb").list_tables()["TableNames"] == []

    deployer.deploy(StackOptions("demo", aggregator=False))
    planned = deployer.deploy(
        StackOptions("demo", aggregator=False, namespace_policies=("t1",)), plan=True
    )
    assert planned.action == "plan" and len(planned.changes) == 3
    cfn = aws.client("cloudformation")
    assert cfn.list_change_sets(StackName="demo")["Summaries"] == []
    assert "Ns" not in cfn.get_template(StackName="demo")["TemplateBody"]


def test_declined_change_set_is_discarded(aws: Aws) -> None:
    deployer = Deployer(aws, poll_seconds=0.01)
    deployer.deploy(StackOptions("demo", aggregator=False))
    result = deployer.deploy(
        StackOptions("demo", aggregator=False, namespace_policies=("t1",)),
        approve=lambda changes: False,
    )
    assert result.action == "declined"
    assert aws.client("cloudformation").list_change_sets(StackName="demo")["Summaries"] == []


def test_aggregator_stack_on_moto(aws: Aws) -> None:
    options = StackOptions(
        "agg",
        batch_size=250,
        batching_window_seconds=3,
        usage_windows=("hourly", "daily"),
        usage_retention_days=30,
    )
    result = Deployer(aws, poll_seconds=0.01).deploy(options)
    assert result.action == "create"
    function = aws.client("lambda").get_function(FunctionName="agg-aggregator")
    config = function["Configuration"]
    assert (config["Runtime"], config["Handler"]) == ("python3.12", AGGREGATOR_HANDLER)
    variables = config["Environment"]["Variables"]
    archive = variables.pop("ZAEL_AUDIT_ARCHIVE_BUCKET")
    assert variables == {
        "ZAEL_NAME": "agg",
        "ZAEL_USAGE_WINDOWS": "hourly,daily",
        "ZAEL_USAGE_RETENTION_DAYS": "30",
    }
    aws.client("s3").head_bucket(Bucket=archive)  # moto's CloudFormation skips lifecycle rules
    (mapping,) = aws.client("lambda").list_event_source_mappings(FunctionName="agg-aggregator")[
        "EventSourceMappings"
    ]
    assert mapping["BatchSize"] == 250
    bucket = f"zae-limiter-artifacts-123456789012-{aws.region}"
    (obj,) = aws.client("s3").list_objects_v2(Bucket=bucket)["Contents"]
    body = aws.client("s3").get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    assert "zae_limiter/__init__.py" in zipfile.ZipFile(io.BytesIO(body)).namelist()


def test_table_only_creates_table_indexes_and_version(aws: Aws) -> None:
    result = deploy_table_only(aws, "plain", "test", poll_seconds=0.01)
    assert (result.created, result.status, result.version_written) == (True, "ACTIVE", True)
    described = aws.client("dynamodb").describe_table(TableName="plain")["Table"]
    projections = {
        i["IndexName"]: i["Projection"]["ProjectionType"]
        for i in described["GlobalSecondaryIndexes"]
    }
    assert projections == {i.name: i.projection for i in table.INDEXES}
    assert described["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    ttl = aws.client("dynamodb").describe_time_to_live(TableName="plain")
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "ttl"
    item = aws.client("dynamodb").get_item(TableName="plain", Key=keys.version_key())["Item"]
    assert item[keys.A_SCHEMA_VERSION] == {"N": str(schema.SCHEMA_VERSION)}
    assert item[keys.A_MIN_CLIENT_VERSION] == {"S": schema.MIN_CLIENT_VERSION}
    assert item[keys.A_UPDATED_BY] == {"S": "test"}

    again = deploy_table_only(aws, "plain", "test", poll_seconds=0.01)
    assert (again.created, again.version_written) == (False, False)


def test_version_record_is_never_overwritten(aws: Aws) -> None:
    deploy_table_only(aws, "plain", "first", poll_seconds=0.01)
    assert write_version_record(aws, "plain", "second") is False
    item = aws.client("dynamodb").get_item(TableName="plain", Key=keys.version_key())["Item"]
    assert item[keys.A_UPDATED_BY] == {"S": "first"}


def _event(logical_id: str, status: str, reason: str | None = None) -> StackEvent:
    return StackEvent(datetime(2026, 1, 1), logical_id, "AWS::X::Y", status, reason)


def test_failure_reason_names_the_resource_that_failed_first() -> None:
    events = [
        _event("demo", "CREATE_IN_PROGRESS", "User Initiated"),
        _event("Queue", "CREATE_FAILED", "Resource creation cancelled"),
        _event("AggregatorFunction", "CREATE_FAILED", "S3 key does not exist"),
        _event("demo", "ROLLBACK_IN_PROGRESS", "The following resource(s) failed"),
    ]
    stack: dict[str, Any] = {"StackStatusReason": "rolled back"}
    reason = failure_reason("ROLLBACK_COMPLETE", events, stack)
    assert reason == (
        "ROLLBACK_COMPLETE: AggregatorFunction (AWS::X::Y): S3 key does not exist"
    )
    assert failure_reason("DELETE_FAILED", [], stack) == "DELETE_FAILED: rolled back"


def test_status_of_nothing_raises(aws: Aws) -> None:
    from zae_limiter.infra import status

    with pytest.raises(StackNotFoundError):
        status(aws, "nothing")



def test_plan_of_an_unchanged_stack_writes_nothing(aws: Aws) -> None:
    deployer = Deployer(aws, poll_seconds=0.01)
    deployer.deploy(StackOptions("demo", aggregator=False))
    ddb = aws.client("dynamodb")
    ddb.delete_item(TableName="demo", Key=keys.version_key())
    result = deployer.deploy(StackOptions("demo", aggregator=False), plan=True)
    assert (result.action, result.changes, result.version_written) == ("plan", (), False)
    assert "Item" not in ddb.get_item(TableName="demo", Key=keys.version_key())


def test_a_stack_that_was_never_created_is_replaced(aws: Aws) -> None:
    # A CREATE change set never executed leaves the stack in REVIEW_IN_PROGRESS, where
    # CloudFormation allows nothing but deletion.
    options = StackOptions("demo", aggregator=False)
    aws.client("cloudformation").create_change_set(
        StackName="demo", ChangeSetName="left-over", ChangeSetType="CREATE",
        TemplateBody=render_template(options), Capabilities=["CAPABILITY_NAMED_IAM"],
    )  # fmt: skip
    deployer = Deployer(aws, poll_seconds=0.01)
    planned = deployer.deploy(options, plan=True)
    assert planned.action == "plan" and planned.status is None
    assert deployer.stacks.describe("demo")["StackStatus"] == "REVIEW_IN_PROGRESS"  # type: ignore[index]
    created = deployer.deploy(options)
    assert (created.action, created.status) == ("create", "CREATE_COMPLETE")


# moto's CloudFormation has no AWS::DynamoDB::GlobalTable: global variants are checked by
# cfn-lint and our rules (test_infra_render, test_infra_global) instead.
@pytest.mark.parametrize("variant", sorted(v for v in VARIANTS if not VARIANTS[v].is_global))
def test_every_rendered_variant_deploys_on_moto(aws: Aws, variant: str) -> None:
    """The published template fails on moto (`Fn::GetAtt` on a resource a condition left
    out); ours creates every variant cleanly and is torn down again."""
    options = VARIANTS[variant]
    deployer = Deployer(aws, poll_seconds=0.01)
    result = deployer.deploy(options)
    assert result.action == "create"
    stack = aws.client("cloudformation").describe_stacks(StackName=options.name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    described = aws.client("dynamodb").describe_table(TableName=options.name)["Table"]
    assert {i["IndexName"] for i in described["GlobalSecondaryIndexes"]} == {
        i.name for i in table.INDEXES
    }
    if options.deletion_protection:
        assert described["DeletionProtectionEnabled"] is True  # and so it stays
    else:
        deployer.delete(options.name)
