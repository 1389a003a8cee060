"""The dashboard, Contributor Insights and the audit archive bucket in the rendered stack."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.infra._helpers import parsed, resources
from zae_limiter import table
from zae_limiter.errors import ValidationError
from zae_limiter.infra.lint import lint_template
from zae_limiter.infra.options import StackOptions
from zae_limiter.infra.render import render_template

#: The metrics each AWS namespace publishes for the dimension the widgets use.
KNOWN_METRICS = {
    ("AWS/DynamoDB", "TableName"): {
        "ConsumedReadCapacityUnits", "ConsumedWriteCapacityUnits",
        "ReadThrottleEvents", "WriteThrottleEvents",
    },
    ("AWS/Lambda", "FunctionName"): {"Errors", "Duration", "IteratorAge"},
    ("AWS/SQS", "QueueName"): {"ApproximateNumberOfMessagesVisible"},
}  # fmt: skip
#: Which resource type each dimension names.
DIMENSION_TYPES = {
    "TableName": "AWS::DynamoDB::Table",
    "FunctionName": "AWS::Lambda::Function",
    "QueueName": "AWS::SQS::Queue",
}


def _body(options: StackOptions) -> dict[str, Any]:
    dashboard = resources(options)["Dashboard"]["Properties"]
    body: dict[str, Any] = json.loads(dashboard["DashboardBody"]["Fn::Sub"])
    return body


def _metric_lines(body: dict[str, Any]) -> list[list[str]]:
    return [line for w in body["widgets"] if w["type"] == "metric"
            for line in w["properties"]["metrics"]]  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [StackOptions("demo"), StackOptions("demo", aggregator=False)],
    ids=["defaults", "no-aggregator"],
)
def test_every_widget_metric_names_what_the_template_emits(options: StackOptions) -> None:
    template = parsed(options)
    emitted = template["Resources"]
    indexes = {i["IndexName"] for i in emitted["Table"]["Properties"]["GlobalSecondaryIndexes"]}
    lines = _metric_lines(_body(options))
    assert lines
    for namespace, metric, dimension, value, *more in lines:
        assert metric in KNOWN_METRICS[(namespace, dimension)], (namespace, metric)
        ref = re.fullmatch(r"\$\{(\w+)(\.QueueName)?\}", value)
        assert ref, value
        assert emitted[ref[1]]["Type"] == DIMENSION_TYPES[dimension], value
        if more:
            assert more[0] == "GlobalSecondaryIndexName" and more[1] in indexes, more


def test_the_dashboard_covers_table_indexes_aggregator_and_dead_letters() -> None:
    lines = _metric_lines(_body(StackOptions("demo")))
    metrics = {(line[1], line[-1]) for line in lines}
    for index in (i.name for i in table.INDEXES):
        assert ("WriteThrottleEvents", index) in metrics
        assert ("ConsumedReadCapacityUnits", index) in metrics
    assert {line[1] for line in lines} >= {
        "Errors", "Duration", "IteratorAge", "ApproximateNumberOfMessagesVisible",
    }  # fmt: skip


def test_no_dashboard_and_no_contributor_insights() -> None:
    options = StackOptions("demo", dashboard=False, contributor_insights=False)
    data = parsed(options)
    assert "Dashboard" not in data["Resources"] and "DashboardName" not in data["Outputs"]
    assert "ContributorInsightsSpecification" not in data["Resources"]["Table"]["Properties"]
    assert lint_template(render_template(options)) == []


def test_contributor_insights_on_the_table_by_default() -> None:
    props = resources(StackOptions("demo"))["Table"]["Properties"]
    assert props["ContributorInsightsSpecification"] == {"Enabled": True}


def test_archive_bucket_with_its_glacier_rule() -> None:
    res = resources(StackOptions("demo", audit_archive_glacier_days=30))
    bucket = res["AuditArchiveBucket"]
    assert bucket["DeletionPolicy"] == "Retain"
    (rule,) = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["Prefix"] == "audit/"
    assert rule["Transitions"] == [{"StorageClass": "GLACIER_IR", "TransitionInDays": 30}]
    env = res["AggregatorFunction"]["Properties"]["Environment"]["Variables"]
    assert env["ZAEL_AUDIT_ARCHIVE_BUCKET"] == {"Ref": "AuditArchiveBucket"}


@pytest.mark.parametrize(
    "options",
    [StackOptions("demo", audit_archive=False), StackOptions("demo", aggregator=False)],
    ids=["no-audit-archive", "no-aggregator"],
)
def test_no_archive_leaves_no_bucket(options: StackOptions) -> None:
    text = render_template(options)
    assert "AuditArchiveBucket" not in text and "ZAEL_AUDIT_ARCHIVE_BUCKET" not in text
    assert lint_template(text) == []


def test_glacier_days_are_checked() -> None:
    with pytest.raises(ValidationError, match="--audit-archive-glacier-days"):
        StackOptions("demo", audit_archive_glacier_days=-1)
