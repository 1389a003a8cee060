"""The partition emulator in front of a real endpoint, driven with boto3 (retries off)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests._servers import EngineEndpoint, unique_name
from zae_limiter.testing import PartitionEmulator

pytestmark = pytest.mark.engine

LIMIT = 5


@pytest.fixture
def emulator(engine_endpoint: EngineEndpoint) -> Iterator[PartitionEmulator]:
    with PartitionEmulator(engine_endpoint.url, writes_per_second=LIMIT) as emu:
        yield emu


@pytest.fixture
def client(engine_endpoint: EngineEndpoint, emulator: PartitionEmulator) -> Any:
    kwargs = engine_endpoint.client_kwargs()
    kwargs["endpoint_url"] = emulator.endpoint_url
    kwargs["config"] = Config(
        account_id_endpoint_mode="disabled", retries={"total_max_attempts": 1}
    )
    make: Any = boto3.client
    return make("dynamodb", **kwargs)


@pytest.fixture
def table(client: Any, emulator: PartitionEmulator) -> str:
    name = unique_name()
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    emulator.reset()
    return name


def _put(client: Any, table: str, pk: str, value: int) -> str:
    """ "ok" or the error code."""
    try:
        client.put_item(TableName=table, Item={"PK": {"S": pk}, "v": {"N": str(value)}})
    except ClientError as error:
        return str(error.response["Error"]["Code"])
    return "ok"


def _burst_in_one_second(client: Any, table: str, pk: str, count: int) -> list[str]:
    # Start at the top of a second so the burst does not straddle two windows.
    time.sleep(1 - time.time() % 1 + 0.01)
    return [_put(client, table, pk, i) for i in range(count)]


def test_writes_past_the_limit_are_throttled_and_not_forwarded(
    client: Any, table: str, emulator: PartitionEmulator
) -> None:
    results = _burst_in_one_second(client, table, "hot", LIMIT + 3)
    assert results[:LIMIT] == ["ok"] * LIMIT
    assert results[LIMIT:] == ["ProvisionedThroughputExceededException"] * 3
    item = client.get_item(TableName=table, Key={"PK": {"S": "hot"}}, ConsistentRead=True)
    assert item["Item"]["v"] == {"N": str(LIMIT - 1)}  # the throttled writes never landed
    stats = emulator.stats()
    assert stats.by_partition["hot"].forwarded == LIMIT
    assert stats.by_partition["hot"].throttled == 3
    assert stats.reads >= 1


def test_reads_and_other_partitions_are_unaffected(
    client: Any, table: str, emulator: PartitionEmulator
) -> None:
    _burst_in_one_second(client, table, "hot", LIMIT + 1)
    assert _put(client, table, "cool", 1) == "ok"
    for _ in range(3 * LIMIT):
        client.get_item(TableName=table, Key={"PK": {"S": "hot"}})
    client.query(
        TableName=table,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": "hot"}},
    )
    assert emulator.stats().by_partition["cool"].throttled == 0


def test_transactions_count_each_item(client: Any, table: str, emulator: PartitionEmulator) -> None:
    def put(pk: str) -> dict[str, Any]:
        return {"Put": {"TableName": table, "Item": {"PK": {"S": pk}}}}

    time.sleep(1 - time.time() % 1 + 0.01)
    client.transact_write_items(TransactItems=[put("t1"), put("t2")])
    for i in range(LIMIT - 1):
        assert _put(client, table, "t1", i) == "ok"
    with pytest.raises(ClientError) as raised:
        client.transact_write_items(TransactItems=[put("t1"), put("t3")])
    assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    stored = client.scan(TableName=table, ProjectionExpression="PK")["Items"]
    assert {"PK": {"S": "t3"}} not in stored and {"PK": {"S": "t2"}} in stored


def test_limit_can_change_while_running(
    client: Any, table: str, emulator: PartitionEmulator
) -> None:
    emulator.writes_per_second = 1000
    assert _burst_in_one_second(client, table, "hot", 3 * LIMIT) == ["ok"] * 3 * LIMIT


def test_stop_leaves_no_threads(engine_endpoint: EngineEndpoint) -> None:
    before = set(threading.enumerate())
    emulator = PartitionEmulator(engine_endpoint.url, writes_per_second=LIMIT).start()
    kwargs = engine_endpoint.client_kwargs()
    kwargs["endpoint_url"] = emulator.endpoint_url
    make: Any = boto3.client
    client = make("dynamodb", **kwargs)
    client.list_tables()  # leaves an idle keep-alive connection (and its thread) open
    emulator.stop()
    emulator.stop()  # idempotent
    assert set(threading.enumerate()) <= before
    client.close()
