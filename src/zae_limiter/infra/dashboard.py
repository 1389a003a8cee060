"""The stack's CloudWatch dashboard, built as data (no AWS calls).

The body is a JSON string for `Fn::Sub`: `${Table}`, `${AggregatorFunction}` and
`${DeadLetterQueue.QueueName}` become the names CloudFormation gives the resources, so
a widget can only name what the stack itself creates (tests/infra checks every metric).
"""

from __future__ import annotations

import json
from typing import Any

from zae_limiter import table
from zae_limiter.infra.options import StackOptions

#: Each widget row is 24 units wide; three graphs of 8 each per row.
_WIDTH = 8
_HEIGHT = 6

#: Per index; the table widgets add the same metrics without the index dimension.
TABLE_METRICS = (
    ("ConsumedReadCapacityUnits", "Sum"),
    ("ConsumedWriteCapacityUnits", "Sum"),
    ("ReadThrottleEvents", "Sum"),
    ("WriteThrottleEvents", "Sum"),
)
AGGREGATOR_METRICS = (("Errors", "Sum"), ("Duration", "Maximum"), ("IteratorAge", "Maximum"))
DLQ_METRIC = ("ApproximateNumberOfMessagesVisible", "Maximum")


def _graph(title: str, metrics: list[list[Any]], stat: str) -> dict[str, Any]:
    return {
        "type": "metric",
        "width": _WIDTH,
        "height": _HEIGHT,
        "properties": {
            "title": title,
            "region": "${AWS::Region}",
            "view": "timeSeries",
            "stat": stat,
            "period": 60,
            "metrics": metrics,
        },
    }


def _table_widgets() -> list[dict[str, Any]]:
    widgets = []
    for metric, stat in TABLE_METRICS:
        lines: list[list[Any]] = [["AWS/DynamoDB", metric, "TableName", "${Table}"]]
        lines += [
            ["AWS/DynamoDB", metric, "TableName", "${Table}", "GlobalSecondaryIndexName", index]
            for index in (i.name for i in table.INDEXES)
        ]
        widgets.append(_graph(f"{metric} (table and indexes)", lines, stat))
    return widgets


def _aggregator_widgets() -> list[dict[str, Any]]:
    widgets = [
        _graph(
            f"aggregator {metric}",
            [["AWS/Lambda", metric, "FunctionName", "${AggregatorFunction}"]],
            stat,
        )
        for metric, stat in AGGREGATOR_METRICS
    ]
    metric, stat = DLQ_METRIC
    widgets.append(
        _graph(
            "aggregator dead-letter queue depth",
            [["AWS/SQS", metric, "QueueName", "${DeadLetterQueue.QueueName}"]],
            stat,
        )
    )
    return widgets


def _replication_widget(regions: tuple[str, ...]) -> dict[str, Any]:
    # Each series lives in the region the changes come from; a line of a dashboard
    # widget may name its own region, so one graph shows every pair of replicas.
    lines: list[list[Any]] = [
        ["AWS/DynamoDB", "ReplicationLatency", "TableName", "${Table}",
         "ReceivingRegion", receiving, {"region": source, "label": f"{source} -> {receiving}"}]
        for source in regions
        for receiving in regions
        if receiving != source
    ]  # fmt: skip
    widget = _graph("ReplicationLatency (ms, every pair of replicas)", lines, "Average")
    widget["width"] = 24  # up to n*(n-1) lines: a full row keeps the legend readable
    return widget


#: The aggregator's share lines (aggregator/share_log.py), latest per region's share.
SHARES_QUERY = (
    "SOURCE '${AggregatorLogGroup}' | filter zael = \"share\" "
    "| stats latest(percent) as share_pct, latest(capacity) as capacity, "
    "latest(tokens) as tokens by entity, resource, limit, region "
    "| sort entity, resource, limit, region | limit 200"
)


def _shares_widget() -> dict[str, Any]:
    # Logs Insights over the aggregator's share lines: a custom metric per entity, limit
    # and region would cost more than the table for many tenants.
    return {
        "type": "log",
        "width": 24,
        "height": 6,
        "properties": {
            "title": "Regional shares of global limits (latest seen, % of each limit)",
            "region": "${AWS::Region}",
            "view": "table",
            "query": SHARES_QUERY,
        },
    }


def _insights_text() -> dict[str, Any]:
    # DynamoDB names its Contributor Insights rules with a creation timestamp, which a
    # template cannot know; the table's own console page draws them by name.
    link = (
        "https://${AWS::Region}.console.aws.amazon.com/dynamodbv2/home?region=${AWS::Region}"
        "#table?name=${Table}&tab=monitoring"
    )
    return {
        "type": "text",
        "width": 24,
        "height": 2,
        "properties": {
            "markdown": "**Hot keys**: the most accessed and most throttled partition keys "
            f"(entities and shards by name) are under [Contributor Insights]({link})."
        },
    }


def dashboard_widgets(options: StackOptions) -> list[dict[str, Any]]:
    """The widgets, placed left to right and top to bottom."""
    widgets = _table_widgets()
    if options.aggregator:
        widgets += _aggregator_widgets()
    if len(options.regions) > 1:
        widgets.append(_replication_widget(options.regions))
        if options.aggregator:
            widgets.append(_shares_widget())
    if options.contributor_insights:
        widgets.insert(0, _insights_text())
    return widgets


def dashboard_body(options: StackOptions) -> str:
    """The DashboardBody, a JSON string with `${...}` for Fn::Sub."""
    return json.dumps({"widgets": dashboard_widgets(options)}, separators=(",", ":"))
