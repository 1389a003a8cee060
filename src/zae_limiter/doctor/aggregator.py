"""The aggregator: on AWS the stack's Lambda, its stream mapping and its recent errors;
on a local engine, where no Lambda runs, whether the poller can read the stream.

`gather` asks AWS; `judge` decides from what was gathered, so every verdict is testable
without AWS (and `gather` with moto's in-process mocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from zae_limiter.doctor.context import AwsCallError, Context, call
from zae_limiter.doctor.report import Check, fail, ok, skip, warn

NAME = "aggregator"
#: How far back the aggregator's errors are counted.
ERROR_WINDOW = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class AggregatorFacts:
    stack_status: str | None = None
    stack_reason: str | None = None
    stack_error: str | None = None
    function: str | None = None
    function_state: str | None = None
    function_error: str | None = None
    mapping: str | None = None
    mapping_state: str | None = None
    mapping_error: str | None = None
    errors: int | None = None
    invocations: int | None = None
    metrics_error: str | None = None


def _metric_sum(ctx: Context, function: str, metric: str) -> int:
    # To the end of the current minute: the window then holds this minute's data too.
    now = datetime.fromtimestamp(ctx.target.clock() / 1000, UTC)
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    answer = call(
        ctx.client("cloudwatch"),
        "get_metric_statistics",
        Namespace="AWS/Lambda",
        MetricName=metric,
        Dimensions=[{"Name": "FunctionName", "Value": function}],
        StartTime=end - ERROR_WINDOW,
        EndTime=end,
        Period=int(ERROR_WINDOW.total_seconds()),
        Statistics=["Sum"],
    )
    return int(sum(point.get("Sum", 0) for point in answer.get("Datapoints", [])))


def gather(ctx: Context) -> AggregatorFacts:
    """What AWS says of the stack's aggregator (`ctx.load_stack()` already ran)."""
    if ctx.stack_error is not None or ctx.stack is None:
        return AggregatorFacts(stack_error=ctx.stack_error)
    facts: dict[str, Any] = {
        "stack_status": ctx.stack.get("StackStatus"),
        "stack_reason": ctx.stack.get("StackStatusReason"),
    }
    by_type = {r.get("ResourceType"): r.get("PhysicalResourceId") for r in ctx.stack_resources}
    function = by_type.get("AWS::Lambda::Function")
    mapping = by_type.get("AWS::Lambda::EventSourceMapping")
    facts |= {"function": function, "mapping": mapping}
    if function:
        try:
            got = call(ctx.client("lambda"), "get_function", FunctionName=function)
            facts["function_state"] = got.get("Configuration", {}).get("State") or "Active"
        except AwsCallError as error:
            facts["function_error"] = str(error)
        try:
            facts["errors"] = _metric_sum(ctx, function, "Errors")
            facts["invocations"] = _metric_sum(ctx, function, "Invocations")
        except AwsCallError as error:
            facts["metrics_error"] = str(error)
    if mapping:
        try:
            got = call(ctx.client("lambda"), "get_event_source_mapping", UUID=mapping)
            facts["mapping_state"] = got.get("State")
        except AwsCallError as error:
            facts["mapping_error"] = str(error)
    return AggregatorFacts(**facts)


def judge(name: str, facts: AggregatorFacts) -> Check:
    """Pure: the verdict on the aggregator from what `gather` found."""
    deploy = f"`zae-limiter deploy --name {name}`"
    details = _facts(facts)
    if facts.stack_error is not None:
        return warn(
            NAME, f"the stack could not be read: {facts.stack_error}",
            "grant cloudformation:DescribeStacks and ListStackResources on the stack",
            **details,
        )  # fmt: skip
    if facts.stack_status is None:
        return warn(
            NAME,
            f"no stack {name!r} (a --table-only deployment?): no aggregator runs, so no usage "
            "snapshots, no shard merges, no audit archive",
            f"{deploy} (with the aggregator), or run `zae-limiter aggregator run --name {name}`",
            **details,
        )
    status = facts.stack_status
    if status.endswith("FAILED") or status.endswith("ROLLBACK_COMPLETE"):
        return fail(
            NAME, f"stack {name!r} is {status}: {facts.stack_reason or 'see its events'}",
            f"fix the cause in the stack's events, then {deploy} again", **details,
        )  # fmt: skip
    if facts.function is None:
        return warn(
            NAME, f"stack {name!r} has no aggregator (deployed with --no-aggregator)",
            f"{deploy} --aggregator, or run `zae-limiter aggregator run --name {name}`",
            **details,
        )  # fmt: skip
    if facts.function_error is not None or facts.function_state not in (None, "Active"):
        found = facts.function_error or f"state {facts.function_state}"
        return fail(NAME, f"aggregator function {facts.function}: {found}", deploy, **details)
    if facts.mapping is None or facts.mapping_error is not None:
        return fail(
            NAME, f"the aggregator has no stream mapping: {facts.mapping_error or 'none'}",
            f"{deploy} re-creates it", **details,
        )  # fmt: skip
    if facts.mapping_state != "Enabled":
        return fail(
            NAME, f"the aggregator's stream mapping is {facts.mapping_state}: nothing is "
            "aggregated",
            f"aws lambda update-event-source-mapping --uuid {facts.mapping} --enabled",
            **details,
        )  # fmt: skip
    if facts.metrics_error is not None:
        return warn(
            NAME, f"function and mapping fine; its metrics could not be read: "
            f"{facts.metrics_error}",
            "grant cloudwatch:GetMetricStatistics", **details,
        )  # fmt: skip
    if facts.errors:
        return warn(
            NAME, f"{facts.errors} failed invocations of {facts.function} in the last hour "
            f"(of {facts.invocations})",
            f"read its logs: aws logs tail /aws/lambda/{facts.function} --since 1h",
            **details,
        )  # fmt: skip
    return ok(
        NAME, f"{facts.function} Active, stream mapping Enabled, no errors in the last hour "
        f"({facts.invocations or 0} invocations)", **details,
    )  # fmt: skip


def _facts(facts: AggregatorFacts) -> dict[str, Any]:
    return {
        field: getattr(facts, field)
        for field in AggregatorFacts.__dataclass_fields__
        if getattr(facts, field) is not None
    }


def check_local(ctx: Context) -> Check:
    """No Lambda runs on a local engine: the poller (`zae-limiter aggregator run`) reads
    the table's stream with DescribeStream / GetShardIterator / GetRecords."""
    reason = "a local engine runs no Lambda"
    if ctx.described is None:
        return skip(NAME, f"{reason}; not checked: no table to check")
    arn = ctx.described.get("LatestStreamArn")
    if arn is None:
        return skip(NAME, f"{reason}, and the table has no stream to poll (see stream)")
    try:
        described = call(ctx.client("dynamodbstreams"), "describe_stream", StreamArn=arn)
    except AwsCallError as error:
        return fail(
            NAME, f"{reason}; the poller cannot read the stream: {error}",
            "check that the engine serves DynamoDB Streams at the same endpoint",
        )  # fmt: skip
    shards = len(described.get("StreamDescription", {}).get("Shards", []))
    return ok(
        NAME,
        f"{reason}: `zae-limiter aggregator run --name {ctx.name}` polls the stream "
        f"({shards} shard{'s' if shards != 1 else ''} readable)",
        stream_arn=arn,
        shards=shards,
    )


def check(ctx: Context) -> Check:
    if ctx.target.local:
        return check_local(ctx)
    return judge(ctx.name, gather(ctx))
