"""The rendered template: lint-clean in every variant, and built from table.py."""

from __future__ import annotations

import fnmatch
import re

import jinja2
import pytest

from tests.infra._helpers import BOUNDARY, TOPIC, VARIANTS, parsed, resources
from zae_limiter import keys, table
from zae_limiter.infra import render_template, templates_dir
from zae_limiter.infra.lint import lint_template
from zae_limiter.infra.options import (
    ACQUIRE_ACTIONS,
    AGGREGATOR_HANDLER,
    LAMBDA_RUNTIME,
    StackOptions,
)
from zae_limiter.infra.render import _environment
from zae_limiter.schema import SCHEMA_VERSION

AGGREGATOR_RESOURCES = {
    "DeadLetterQueue",
    "AggregatorLogGroup",
    "AggregatorRole",
    "AggregatorFunction",
    "AggregatorEventSourceMapping",
    "AggregatorErrorAlarm",
    "AggregatorDurationAlarm",
    "StreamIteratorAgeAlarm",
    "DeadLetterQueueAlarm",
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_passes_cfn_lint_and_our_checks(variant: str) -> None:
    findings = lint_template(render_template(VARIANTS[variant]))
    assert findings == [], "\n".join(map(str, findings))


def test_table_comes_from_table_module() -> None:
    props = resources(StackOptions("demo"))["Table"]["Properties"]
    indexes = props["GlobalSecondaryIndexes"]
    assert [
        (
            i["IndexName"],
            i["KeySchema"][0]["AttributeName"],
            i["KeySchema"][1]["AttributeName"],
            i["Projection"]["ProjectionType"],
        )
        for i in indexes
    ] == [(i.name, i.partition_key, i.sort_key, i.projection) for i in table.INDEXES]
    assert indexes == table.global_secondary_indexes()
    assert props["AttributeDefinitions"] == table.attribute_definitions()
    assert props["KeySchema"] == table.key_schema(keys.PK, keys.SK)
    assert props["StreamSpecification"] == {"StreamViewType": table.STREAM_VIEW_TYPE}
    assert props["TimeToLiveSpecification"] == {
        "AttributeName": table.TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert props["BillingMode"] == table.BILLING_MODE
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["TableName"] == "demo"


def test_defaults_have_the_aggregator_wired_up() -> None:
    res = resources(StackOptions("demo"))
    assert set(res) >= AGGREGATOR_RESOURCES
    function = res["AggregatorFunction"]["Properties"]
    assert function["Runtime"] == LAMBDA_RUNTIME == "python3.12"
    assert function["Handler"] == AGGREGATOR_HANDLER
    assert function["Code"] == {
        "S3Bucket": {"Ref": "ArtifactBucket"},
        "S3Key": {"Ref": "ArtifactKey"},
    }
    assert (function["MemorySize"], function["Timeout"]) == (256, 60)
    mapping = res["AggregatorEventSourceMapping"]["Properties"]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["Table", "StreamArn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert (mapping["BatchSize"], mapping["MaximumBatchingWindowInSeconds"]) == (100, 1)
    assert mapping["MaximumRetryAttempts"] == 3
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}}
    }
    log_group = res["AggregatorLogGroup"]["Properties"]
    assert log_group == {"LogGroupName": "/aws/lambda/demo-aggregator", "RetentionInDays": 30}
    assert res["AggregatorDurationAlarm"]["Properties"]["Threshold"] == 48000


def test_aggregator_role_is_least_privilege() -> None:
    role = resources(StackOptions("demo"))["AggregatorRole"]["Properties"]
    statements = {
        s["Sid"]: s for s in role["Policies"][0]["PolicyDocument"]["Statement"]
    }
    assert set(statements) == {"ReadStream", "WriteTable", "Logs", "DeadLetters", "ArchiveAudit"}
    assert statements["ArchiveAudit"]["Action"] == ["s3:PutObject"]
    assert statements["ArchiveAudit"]["Resource"] == [
        {"Fn::Sub": "${AuditArchiveBucket.Arn}/audit/*"}
    ]
    assert statements["ReadStream"]["Resource"] == [{"Fn::Sub": "${Table.Arn}/stream/*"}]
    # The policy table's aggregator role, which tests/integration/test_iam_policy.py holds
    # against the handler's calls: no GetItem, PutItem or Query, and no index. DeleteItem
    # only for the shards a merge drained, before a raise makes room over them (under a
    # condition on what it read: docs/aggregator.md).
    assert set(statements["WriteTable"]["Action"]) == {
        "dynamodb:UpdateItem", "dynamodb:BatchGetItem", "dynamodb:DescribeTable",
        "dynamodb:DeleteItem",
    }  # fmt: skip
    assert statements["WriteTable"]["Resource"] == [{"Fn::GetAtt": ["Table", "Arn"]}]
    assert set(statements["ReadStream"]["Action"]) == {
        "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
    }  # fmt: skip
    assert statements["DeadLetters"]["Action"] == ["sqs:SendMessage"]
    assert "RoleName" not in role and "PermissionsBoundary" not in role


def test_no_aggregator_leaves_no_trace_of_it() -> None:
    options = StackOptions("demo", aggregator=False, alarm_sns_topic=TOPIC)
    text = render_template(options)
    data = parsed(options)
    assert not AGGREGATOR_RESOURCES & set(data["Resources"])
    assert "Parameters" not in data
    for name in (*AGGREGATOR_RESOURCES, "ArtifactBucket", "ArtifactKey"):
        assert not re.search(rf"\b{name}\b", text), name
    assert {"ReadThrottleAlarm", "WriteThrottleAlarm"} <= set(data["Resources"])


def test_alarm_topic_becomes_the_alarm_action() -> None:
    res = resources(StackOptions("demo", alarm_sns_topic=TOPIC))
    alarms = [r["Properties"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(alarms) == 6
    assert all(alarm["AlarmActions"] == [TOPIC] for alarm in alarms)
    assert all("AlarmActions" not in r["Properties"] for r in _alarms(StackOptions("demo")))
    assert _alarms(StackOptions("demo", alarms=False)) == []


def _alarms(options: StackOptions) -> list[dict[str, object]]:
    return [r for r in resources(options).values() if r["Type"] == "AWS::CloudWatch::Alarm"]


def test_pitr_and_deletion_protection() -> None:
    props = resources(StackOptions("demo", pitr_recovery_days=7))["Table"]["Properties"]
    assert props["PointInTimeRecoverySpecification"] == {
        "PointInTimeRecoveryEnabled": True,
        "RecoveryPeriodInDays": 7,
    }
    assert props["DeletionProtectionEnabled"] is False
    protected = resources(StackOptions("demo", deletion_protection=True))["Table"]
    assert protected["Properties"]["DeletionProtectionEnabled"] is True
    assert "PointInTimeRecoverySpecification" not in protected["Properties"]


def test_permission_boundary_and_role_name() -> None:
    options = StackOptions("demo", permission_boundary=BOUNDARY, role_name_format="{}-agg")
    role = resources(options)["AggregatorRole"]["Properties"]
    assert role["PermissionsBoundary"] == BOUNDARY
    assert role["RoleName"] == "demo-agg"


def test_acquire_policy_is_exactly_the_acquire_actions() -> None:
    res = resources(StackOptions("demo"))
    statement = res["AcquirePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert statement["Action"] == list(ACQUIRE_ACTIONS)
    assert statement["Resource"] == [
        {"Fn::GetAtt": ["Table", "Arn"]},
        {"Fn::Sub": "${Table.Arn}/index/*"},
    ]


def test_acquire_policies_may_not_write_audit_events() -> None:
    policies = {
        logical_id: r["Properties"]["PolicyDocument"]["Statement"]
        for logical_id, r in resources(StackOptions("demo", namespace_policies=("t1",))).items()
        if r["Type"] == "AWS::IAM::ManagedPolicy"
    }
    for logical_id, statements in policies.items():
        denials = [s for s in statements if s["Effect"] == "Deny"]
        if not logical_id.endswith("AcquirePolicy"):
            assert denials == [], logical_id  # read-only and full access keep audit events
            continue
        (deny,) = denials
        audit_pk = keys.audit_pk("t1", "acme")
        (pattern,) = deny["Condition"]["ForAnyValue:StringLike"]["dynamodb:LeadingKeys"]
        assert fnmatch.fnmatchcase(audit_pk, pattern)
        assert not fnmatch.fnmatchcase(keys.bucket_pk("t1", "acme", "gpt-4", 0), pattern)
        assert not fnmatch.fnmatchcase(keys.entity_pk("t1", "AUDIT"), pattern)
        assert set(deny["Action"]) == {"dynamodb:PutItem", "dynamodb:UpdateItem"}


def test_namespace_policies_are_scoped_by_leading_keys() -> None:
    data = parsed(StackOptions("demo", namespace_policies=("tenant-a",)))
    scoped = {
        logical_id: r["Properties"]
        for logical_id, r in data["Resources"].items()
        if r["Type"] == "AWS::IAM::ManagedPolicy" and logical_id.startswith("Ns")
    }
    assert len(scoped) == 3
    for props in scoped.values():
        table_statement, version_statement = props["PolicyDocument"]["Statement"][:2]
        condition = table_statement["Condition"]["ForAllValues:StringLike"]
        assert condition["dynamodb:LeadingKeys"] == ["tenant-a/*", "tenant-a"]
        assert "dynamodb:Scan" not in table_statement["Action"]
        assert version_statement["Action"] == ["dynamodb:GetItem"]
        assert version_statement["Condition"]["ForAllValues:StringEquals"] == {
            "dynamodb:LeadingKeys": [keys.VERSION_PK]
        }
        assert props["ManagedPolicyName"].startswith("demo-ns-tenant-a-")
    assert sum(key.endswith("PolicyArn") and key.startswith("Ns") for key in data["Outputs"]) == 3


def test_outputs_and_schema_version() -> None:
    outputs = parsed(StackOptions("demo"))["Outputs"]
    assert {
        "TableName", "TableArn", "StreamArn", "SchemaVersion", "AcquirePolicyArn",
        "FullAccessPolicyArn", "ReadOnlyPolicyArn", "AggregatorFunctionName",
    } <= set(outputs)  # fmt: skip
    assert outputs["SchemaVersion"]["Value"] == str(SCHEMA_VERSION)


def test_templates_are_found_and_undefined_names_fail() -> None:
    assert (templates_dir() / "stack.yaml.j2").is_file()
    with pytest.raises(jinja2.UndefinedError):
        _environment().get_template("stack.yaml.j2").render(o=StackOptions("demo"))
