"""The AWS-only checks of `zae-limiter doctor` (STS, Lambda, its stream mapping and
metrics, CloudWatch alarms and dashboard) against moto's in-process mocks. moto has no
IAM policy simulator, so the dry probe is what these runs fall back to."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from zae_limiter import SyncRepository
from zae_limiter.doctor import DoctorTarget, aggregator, monitoring, permissions, run_doctor
from zae_limiter.doctor.context import AwsCallError, Context
from zae_limiter.infra.aws import Aws

NAME = "doctor-aws"


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        SyncRepository.open(name=NAME, create_table=True).close()
        yield


def _no_simulator(ctx: Context, namespace: str) -> dict[str, str]:
    raise AwsCallError("NotImplemented", "moto has no policy simulator")


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


def _aggregator_stack(ctx: Context) -> str:
    """A function, its mapping on the table's stream, two alarms and a dashboard, made
    directly, and the stack's resource list naming them (moto's CloudFormation would
    try to run the Lambda). Returns the mapping's UUID."""
    role = boto3.client("iam").create_role(
        RoleName="agg", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17"})
    )["Role"]["Arn"]
    function = f"{NAME}-aggregator"
    boto3.client("lambda").create_function(
        FunctionName=function, Runtime="python3.12", Role=role, Handler="handler.handler",
        Code={"ZipFile": _zip()},
    )  # fmt: skip
    stream = boto3.client("dynamodb").describe_table(TableName=NAME)["Table"]["LatestStreamArn"]
    mapping = boto3.client("lambda").create_event_source_mapping(
        EventSourceArn=stream, FunctionName=function, StartingPosition="LATEST"
    )["UUID"]
    watch = boto3.client("cloudwatch")
    alarms = [f"{NAME}-readthrottlealarm", f"{NAME}-writethrottlealarm"]
    for alarm in alarms:
        watch.put_metric_alarm(
            AlarmName=alarm, MetricName="ReadThrottleEvents", Namespace="AWS/DynamoDB",
            Statistic="Sum", Period=300, EvaluationPeriods=1, Threshold=0,
            ComparisonOperator="GreaterThanThreshold",
        )  # fmt: skip
    watch.put_dashboard(DashboardName=NAME, DashboardBody=json.dumps({"widgets": []}))
    ctx.stack = {"StackName": NAME, "StackStatus": "CREATE_COMPLETE"}
    ctx.stack_resources = [
        {"ResourceType": "AWS::Lambda::Function", "PhysicalResourceId": function},
        {"ResourceType": "AWS::Lambda::EventSourceMapping", "PhysicalResourceId": mapping},
        *({"ResourceType": "AWS::CloudWatch::Alarm", "PhysicalResourceId": a} for a in alarms),
        {"ResourceType": "AWS::CloudWatch::Dashboard", "PhysicalResourceId": NAME},
    ]
    return str(mapping)


def _context() -> Context:
    return Context(DoctorTarget(NAME), Aws("us-east-1"))


def test_a_table_only_deployment_on_aws_warns_of_its_missing_aggregator(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(permissions, "simulate", _no_simulator)
    report = run_doctor(DoctorTarget(NAME, region="us-east-1"))
    statuses = {c.name: c.status for c in report.checks}
    assert not report.local
    assert statuses["credentials"] == "ok"
    assert report.check("credentials").details["arn"].startswith("arn:aws:sts::")
    assert statuses["aggregator"] == "warn"
    assert "zae-limiter aggregator run" in (report.check("aggregator").fix or "")
    assert (statuses["alarms"], statuses["dashboard"]) == ("skip", "skip")
    found = report.check("permissions")
    assert found.status == "ok" and found.details["method"] == "dry probe"
    assert "NotImplemented" in found.summary
    assert report.exit_code == 2  # warnings only


def test_a_denied_simulation_fails_the_permissions_check(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(ctx: Context, namespace: str) -> dict[str, str]:
        return {"dynamodb:GetItem": "allowed", "dynamodb:UpdateItem": "explicitDeny"}

    monkeypatch.setattr(permissions, "simulate", denied)
    report = run_doctor(DoctorTarget(NAME, region="us-east-1"))
    found = report.check("permissions")
    assert found.status == "fail" and "dynamodb:UpdateItem" in found.summary
    assert report.exit_code == 1


def test_the_stacks_aggregator_alarms_and_dashboard_are_read_from_aws(aws: None) -> None:
    ctx = _context()
    mapping = _aggregator_stack(ctx)
    found = aggregator.gather(ctx)
    assert (found.function_state, found.mapping_state, found.errors) == ("Active", "Enabled", 0)
    assert aggregator.judge(NAME, found).status == "ok"
    assert monitoring.check_alarms(ctx).status == "ok"
    assert monitoring.check_dashboard(ctx).status == "ok"

    boto3.client("lambda").update_event_source_mapping(UUID=mapping, Enabled=False)
    disabled = aggregator.judge(NAME, aggregator.gather(ctx))
    assert disabled.status == "fail" and mapping in (disabled.fix or "")


def test_recent_aggregator_errors_warn(aws: None) -> None:
    ctx = _context()
    _aggregator_stack(ctx)
    boto3.client("cloudwatch").put_metric_data(
        Namespace="AWS/Lambda",
        MetricData=[{
            "MetricName": "Errors", "Value": 3, "Timestamp": datetime.now(UTC),
            "Dimensions": [{"Name": "FunctionName", "Value": f"{NAME}-aggregator"}],
        }],
    )  # fmt: skip
    verdict = aggregator.judge(NAME, aggregator.gather(ctx))
    assert verdict.status == "warn" and "3 failed invocations" in verdict.summary


def test_deleted_alarms_and_dashboard_fail(aws: None) -> None:
    ctx = _context()
    _aggregator_stack(ctx)
    watch: Any = boto3.client("cloudwatch")
    watch.delete_alarms(AlarmNames=[f"{NAME}-writethrottlealarm"])
    watch.delete_dashboards(DashboardNames=[NAME])
    alarms, dashboard = monitoring.check_alarms(ctx), monitoring.check_dashboard(ctx)
    assert alarms.status == "fail" and "writethrottlealarm" in alarms.summary
    assert dashboard.status == "fail" and "zae-limiter deploy" in (dashboard.fix or "")


def test_no_region_fails_the_first_check_and_skips_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    report = run_doctor(DoctorTarget(NAME))
    assert report.check("credentials").status == "fail"
    assert "no AWS region" in report.check("credentials").summary
    assert {c.status for c in report.checks[1:]} == {"skip"}
    assert report.exit_code == 1


def test_no_credentials_fail_with_how_to_set_them(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask a metadata service
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    report = run_doctor(DoctorTarget(NAME, region="us-east-1"))
    found = report.check("credentials")
    assert found.status == "fail" and found.summary == "no AWS credentials found"
    assert found.fix is not None and "AWS_PROFILE" in found.fix
    assert report.exit_code == 1
