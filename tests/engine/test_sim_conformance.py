"""The simulator's engine answers as DynamoDB Local does, request for request.

The library's own requests are recorded against DynamoDB Local (`RecordingClient`), then
replayed in the same order on a fresh engine (`replay`); every response (less what two
DynamoDBs legitimately differ in, see `replay.normalise`) and the final table must be
equal. A corpus of hand-made tricky requests is run on both the same way.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.sim.library_schedule import Clock, run_schedule
from tests.sim.tricky_corpus import corpus
from zae_limiter.aggregator.plan import AggregatorConfig
from zae_limiter.aggregator.processor import process
from zae_limiter.sim.engine import Engine
from zae_limiter.sim.engine.replay import (
    Outcome,
    RecordingClient,
    boto3_call,
    canonical_numbers,
    differences,
    replay,
)

pytestmark = pytest.mark.engine


def table_items(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**params)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    ordered = sorted(items, key=lambda item: (item["PK"]["S"], item["SK"]["S"]))
    return canonical_numbers(ordered)  # type: ignore[no-any-return]


def stream_changes(endpoint: EngineEndpoint, table: str) -> list[tuple[Any, ...]]:
    """Every record of the table's stream on DynamoDB Local, as (event, keys, old, new)."""
    arn = endpoint.client().describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = endpoint.client("dynamodbstreams")
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            records.extend(page["Records"])
            iterator = page.get("NextShardIterator") if page["Records"] else None
    records.sort(key=lambda r: int(r["dynamodb"]["SequenceNumber"]))
    return [_change(r) for r in records]


def _change(record: dict[str, Any]) -> tuple[Any, ...]:
    body = record["dynamodb"]
    return canonical_numbers([record["eventName"], body["Keys"], body.get("OldImage"),
                              body.get("NewImage")])  # type: ignore[no-any-return]


SINGLE_ITEM_OPS = frozenset({"get_item", "put_item", "update_item", "delete_item"})


def capacity_differences(expected: list[Outcome], actual: list[Outcome]) -> list[str]:
    out = []
    for i, (a, b) in enumerate(zip(expected, actual, strict=True)):
        if a.op in SINGLE_ITEM_OPS and a.response is not None and b.response is not None:
            left, right = a.response.get("ConsumedCapacity"), b.response.get("ConsumedCapacity")
            if left != right:
                out.append(f"#{i} {a.op} {a.params}: Local {left}, engine {right}")
    return out


def on_engine(recorded: list[Outcome]) -> tuple[Engine, list[Outcome]]:
    engine = Engine(clock=lambda: 1_800_000_000_000)
    return engine, replay(recorded, engine.call)


def test_the_library_schedule_replays_identically(dynamodb_local: EngineEndpoint) -> None:
    table = unique_name("sim-conf")
    real = dynamodb_local.client()
    recorder = RecordingClient(real)
    run_schedule(recorder, Clock(), table=table)
    recorded = recorder.outcomes
    engine, outcomes = on_engine(recorded)
    assert differences(recorded, outcomes) == []
    assert engine.items(table) == table_items(real, table)
    # The capacity the library's meter reads, where DynamoDB Local counts as AWS does: every
    # single-item call (transactions, BatchGetItem and index scans differ, see capacity.py).
    assert capacity_differences(recorded, outcomes) == []
    # One stream record per change, none for a write that changed nothing: as Local.
    assert [_change(r) for r in engine.records(table)] == stream_changes(dynamodb_local, table)
    ops = {o.op for o in recorded}
    assert {"update_item", "put_item", "query", "transact_write_items"} <= ops
    assert any(o.code == "ConditionalCheckFailedException" for o in recorded)


def test_the_aggregators_writes_answer_alike(dynamodb_local: EngineEndpoint) -> None:
    """The aggregator's usage snapshots (long SET/ADD updates, if_not_exists, fences on
    sequence numbers), from the schedule's stream, written to both and compared."""
    table = unique_name("sim-agg")
    real = dynamodb_local.client()
    recorder = RecordingClient(real)
    clock = Clock()
    run_schedule(recorder, clock, table=table, with_doubling=False)
    engine, _ = on_engine(recorder.outcomes)
    records = engine.records(table)
    writes = []
    for batch in (records[: len(records) // 2], records[len(records) // 2 :], records[:10]):
        plan = process(batch, AggregatorConfig(table=table), clock())
        assert plan.failed == []
        writes.extend((w.call.op, w.call.params) for w in plan.writes)
    assert writes
    expected = replay(writes, boto3_call(real))
    assert differences(expected, replay(expected, engine.call)) == []
    assert engine.items(table) == table_items(real, table)


@pytest.mark.parametrize("case", corpus(), ids=lambda case: case.name)
def test_tricky_requests_answer_as_dynamodb_local(
    dynamodb_local: EngineEndpoint, case: Any
) -> None:
    table = unique_name("sim-trick")
    requests = case.requests(table)
    real = replay(requests, boto3_call(dynamodb_local.client()))
    engine, outcomes = on_engine(real)
    assert differences(real, outcomes) == []
    assert engine.items(table) == table_items(dynamodb_local.client(), table)
