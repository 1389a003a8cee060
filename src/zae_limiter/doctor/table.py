"""The table, its indexes and its stream, against the definition in `zae_limiter.table`."""

from __future__ import annotations

import json
from typing import Any

from zae_limiter import table
from zae_limiter.doctor.context import AwsCallError, Context, call
from zae_limiter.doctor.report import Check, fail, ok, warn

TABLE, INDEXES, STREAM = "table", "indexes", "stream"


def _deploy(name: str) -> str:
    return f"`zae-limiter deploy --name {name}`"


def check_table(ctx: Context) -> Check:
    """DescribeTable: the table exists and is ACTIVE. Sets `ctx.described`."""
    try:
        answer = call(ctx.client("dynamodb"), "describe_table", TableName=ctx.name)
    except AwsCallError as error:
        if error.code == "ResourceNotFoundException":
            return fail(
                TABLE,
                f"table {ctx.name!r} not found in {ctx.aws.region}",
                f"deploy it: {_deploy(ctx.name)} (or pass the right --name / --region / "
                "--endpoint-url)",
            )
        return fail(TABLE, f"DescribeTable failed: {error}", _access_fix(ctx, error))
    ctx.described = dict(answer["Table"])
    status = str(ctx.described.get("TableStatus"))
    details = {"status": status, "arn": ctx.described.get("TableArn")}
    if status != "ACTIVE":
        return warn(
            TABLE,
            f"table {ctx.name!r} is {status}",
            "wait for ACTIVE (an update or index build is under way)",
            **details,
        )
    return ok(TABLE, f"table {ctx.name!r} is ACTIVE", **details)


def _access_fix(ctx: Context, error: AwsCallError) -> str:
    if error.code in {"AccessDeniedException", "UnrecognizedClientException"}:
        return (
            f"grant dynamodb:DescribeTable on table {ctx.name} (the stack's AcquirePolicy "
            "has it), or use credentials that have it"
        )
    return "check the endpoint and network, then run doctor again"


def _create_index_command(name: str, index: table.IndexDef) -> str:
    create = {
        "Create": {
            "IndexName": index.name,
            "KeySchema": table.key_schema(index.partition_key, index.sort_key),
            "Projection": {"ProjectionType": index.projection},
        }
    }
    attributes = " ".join(
        f"AttributeName={a},AttributeType=S" for a in (index.partition_key, index.sort_key)
    )
    return (
        f"aws dynamodb update-table --table-name {name} --attribute-definitions {attributes} "
        f"--global-secondary-index-updates '{json.dumps([create], separators=(',', ':'))}'"
    )


def index_problems(name: str, described: dict[str, Any]) -> list[tuple[str, str]]:
    """(what is wrong, how to fix it) for each index that differs from the definition."""
    found = {i["IndexName"]: i for i in described.get("GlobalSecondaryIndexes") or []}
    problems: list[tuple[str, str]] = []
    for index in table.INDEXES:
        have = found.get(index.name)
        if have is None:
            problems.append((
                f"{index.name} is missing",
                f"{_deploy(name)} adds it through the stack; a table deployed with "
                f"--table-only: {_create_index_command(name, index)}",
            ))  # fmt: skip
            continue
        keys_have = [(k["AttributeName"], k["KeyType"]) for k in have.get("KeySchema", [])]
        keys_want = [(k["AttributeName"], k["KeyType"]) for k in
                     table.key_schema(index.partition_key, index.sort_key)]  # fmt: skip
        projection = (have.get("Projection") or {}).get("ProjectionType")
        rebuild = (
            f"an index's keys and projection cannot be changed: delete {index.name} "
            f"(aws dynamodb update-table --table-name {name} --global-secondary-index-updates "
            f"'[{{\"Delete\":{{\"IndexName\":\"{index.name}\"}}}}]'), then re-create it: "
            f"{_create_index_command(name, index)}"
        )
        if keys_have != keys_want:
            problems.append((f"{index.name} has keys {keys_have}, not {keys_want}", rebuild))
        elif projection != index.projection:
            problems.append(
                (f"{index.name} projects {projection}, not {index.projection}", rebuild)
            )
        elif have.get("IndexStatus", "ACTIVE") != "ACTIVE":
            problems.append((
                f"{index.name} is {have.get('IndexStatus')}",
                "wait until it is ACTIVE (an index is being built or deleted)",
            ))  # fmt: skip
    return problems


def check_indexes(ctx: Context) -> Check:
    assert ctx.described is not None
    problems = index_problems(ctx.name, ctx.described)
    expected = {i.name: i.projection for i in table.INDEXES}
    if not problems:
        names = ", ".join(f"{n} ({p})" for n, p in expected.items())
        return ok(INDEXES, f"{names}: as defined, ACTIVE", expected=expected)
    return fail(
        INDEXES,
        "; ".join(what for what, _ in problems),
        " | ".join(fix for _, fix in problems),
        expected=expected,
        problems=[what for what, _ in problems],
    )


def check_stream(ctx: Context) -> Check:
    assert ctx.described is not None
    spec = ctx.described.get("StreamSpecification") or {}
    view = spec.get("StreamViewType") if spec.get("StreamEnabled") else None
    arn = ctx.described.get("LatestStreamArn")
    want = table.STREAM_VIEW_TYPE
    details = {"view_type": view, "arn": arn if view else None, "expected": want}
    enable = (
        f"aws dynamodb update-table --table-name {ctx.name} "
        f"--stream-specification StreamEnabled=true,StreamViewType={want}"
    )
    if view is None:
        return fail(
            STREAM,
            "the table has no stream: the aggregator (usage snapshots, shard merges, the "
            "audit archive) and `zae-limiter top` read it",
            f"{_deploy(ctx.name)} (the stack enables it), or: {enable}",
            **details,
        )
    if view != want:
        return fail(
            STREAM,
            f"the stream shows {view}; the aggregator needs {want} (old and new images)",
            f"a stream's view type cannot be changed: disable it (aws dynamodb update-table "
            f"--table-name {ctx.name} --stream-specification StreamEnabled=false), then "
            f"{enable}; then {_deploy(ctx.name)} to point the aggregator at the new stream",
            **details,
        )
    return ok(STREAM, f"stream enabled, {view}", **details)
