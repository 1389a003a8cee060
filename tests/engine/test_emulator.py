"""The partition emulator in front of a real endpoint, driven with boto3 (retries off).

The emulator's per-second accounting runs on a virtual clock here: a burst lands in one
window however slowly a loaded machine sends it, and a new window is a step of the clock,
never a sleep to the top of a wall-clock second."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Limit, RateLimiterUnavailable, SyncRateLimiter, SyncRepository
from zae_limiter.errors import TABLE_WRITE_KEY_RANGE, TABLE_WRITE_PROVISIONED
from zae_limiter.testing import PartitionEmulator

pytestmark = pytest.mark.engine

LIMIT = 5


class Seconds:
    """Wall-clock seconds (as `time.time()` gives them) that move only when told."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.25

    def __call__(self) -> float:
        return self.now

    def next_window(self) -> None:
        self.now += 1.0


@pytest.fixture
def seconds() -> Seconds:
    return Seconds()


@pytest.fixture
def emulator(engine_endpoint: EngineEndpoint, seconds: Seconds) -> Iterator[PartitionEmulator]:
    with PartitionEmulator(engine_endpoint.url, writes_per_second=LIMIT, clock=seconds) as emu:
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


def _burst(client: Any, table: str, pk: str, count: int) -> list[str]:
    """`count` writes to one partition, all inside the current (virtual) second."""
    return [_put(client, table, pk, i) for i in range(count)]


def test_writes_past_the_limit_are_throttled_and_not_forwarded(
    client: Any, table: str, emulator: PartitionEmulator
) -> None:
    results = _burst(client, table, "hot", LIMIT + 3)
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
    _burst(client, table, "hot", LIMIT + 1)
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
    assert _burst(client, table, "hot", 3 * LIMIT) == ["ok"] * 3 * LIMIT


def test_a_new_second_is_a_new_window(
    client: Any, table: str, emulator: PartitionEmulator, seconds: Seconds
) -> None:
    assert _burst(client, table, "hot", LIMIT + 1)[-1] == "ProvisionedThroughputExceededException"
    seconds.next_window()
    assert _burst(client, table, "hot", LIMIT + 1) == ["ok"] * LIMIT + [
        "ProvisionedThroughputExceededException"
    ]
    by_second = emulator.stats()
    assert by_second.by_partition["hot"].forwarded == 2 * LIMIT


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


def _reasons(client: Any, table: str, pk: str) -> list[dict[str, str]]:
    with pytest.raises(ClientError) as raised:
        client.put_item(TableName=table, Item={"PK": {"S": pk}})
    assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    return list(raised.value.response.get("ThrottlingReasons", []))


def test_a_throttle_names_whose_limit_refused_it(
    client: Any, table: str, emulator: PartitionEmulator
) -> None:
    """As DynamoDB does (ThrottlingReasons): the partition's own limit, or the table's."""
    _burst(client, table, "hot", LIMIT)
    [reason] = _reasons(client, table, "hot")
    assert reason["reason"] == TABLE_WRITE_KEY_RANGE
    assert reason["resource"].endswith(f":table/{table}")
    emulator.table_writes_per_second = 1
    emulator.reset()
    assert _put(client, table, "cool", 1) == "ok"
    assert [r["reason"] for r in _reasons(client, table, "other")] == [TABLE_WRITE_PROVISIONED]
    emulator.throttling_reasons = False  # an endpoint from before reasons: none given
    assert _reasons(client, table, "other") == []


def test_the_library_keeps_a_throttles_reasons(
    engine_endpoint: EngineEndpoint, emulator: PartitionEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the library's own request path: the refusal that reaches the caller says
    the partition refused it (flows/scaling/evidence.py doubles on that, when it may)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", emulator.endpoint_url)
    name = unique_name()
    roomy = [Limit.per_second("rps", 1000)]
    with SyncRepository.open(name=name, create_table=True, max_shards=1, reserve=False) as repo:
        limiter = SyncRateLimiter(repo)
        with pytest.raises(RateLimiterUnavailable) as raised:
            for _ in range(3 * LIMIT):  # the clock stands still: the window never resets
                with limiter.acquire("tenant", "api", {"rps": 1}, limits=roomy):
                    pass
    assert raised.value.throttled
    assert raised.value.reasons == (TABLE_WRITE_KEY_RANGE,)
    assert raised.value.partition_throttled is True
