"""The lean path and the regular client answer alike: the same calls through both, on a
moto server and on DynamoDB Local, and through the partition emulator for throttling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests._servers import EngineEndpoint, unique_name
from zae_limiter.repository import client_kwargs
from zae_limiter.table import create_table_params
from zae_limiter.testing import PartitionEmulator
from zae_limiter.wire import lean_client

METERED = {"ReturnConsumedCapacity": "INDEXES"}


def regular_client(url: str) -> Any:
    make: Any = boto3.session.Session().client
    return make("dynamodb", **client_kwargs("us-east-1", url, 10.0))


@pytest.fixture(scope="module")
def table(engine_endpoint: EngineEndpoint) -> str:
    name = unique_name("zael-wire")
    client = engine_endpoint.client()
    client.create_table(**create_table_params(name))
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})
    return name


def comparable(response: dict[str, Any]) -> dict[str, Any]:
    """A response without what differs between any two calls (request id, date...)."""
    meta = response.get("ResponseMetadata", {})
    kept = {k: v for k, v in response.items() if k != "ResponseMetadata"}
    return {**kept, "status": meta.get("HTTPStatusCode")}


def outcome(call: Callable[[], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    try:
        return "ok", comparable(call())
    except ClientError as error:
        return type(error).__name__, comparable(dict(error.response))


def key(pk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "#STATE"}}


def calls(table: str, pk: str) -> list[tuple[str, dict[str, Any]]]:
    """One scenario: each step is (operation, params); run in order on a fresh key."""
    add = {
        "TableName": table,
        "Key": key(pk),
        "UpdateExpression": "ADD #t :n",
        "ExpressionAttributeNames": {"#t": "tk"},
        **METERED,
    }
    return [
        (
            "put_item",
            {
                "TableName": table,
                "Item": {**key(pk), "tk": {"N": "5"}, "b": {"B": b"\x00\xff"}},
                **METERED,
            },
        ),
        (
            "update_item",
            {**add, "ExpressionAttributeValues": {":n": {"N": "-2"}}, "ReturnValues": "ALL_NEW"},
        ),
        (
            "update_item",
            {  # a failed condition returns the item as it was
                **add,
                "ExpressionAttributeValues": {":n": {"N": "-10"}, ":need": {"N": "10"}},
                "ConditionExpression": "#t >= :need",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        ("get_item", {"TableName": table, "Key": key(pk), "ConsistentRead": True, **METERED}),
        (
            "batch_get_item",
            {"RequestItems": {table: {"Keys": [key(pk), key(pk + "-none")]}}, **METERED},
        ),
        (
            "update_item",
            {**add, "UpdateExpression": "ADD", "ExpressionAttributeValues": {":n": {"N": "1"}}},
        ),
        ("get_item", {"TableName": table + "-missing", "Key": key(pk)}),
    ]


def run(client: Any, steps: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for op, params in steps:
        method = getattr(client, op)
        rows.append(outcome(lambda: method(**params)))  # noqa: B023 - called right here
    return rows


def test_sync_lean_answers_like_the_regular_client(
    engine_endpoint: EngineEndpoint, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in engine_endpoint.env.items():
        monkeypatch.setenv(name, value)
    client = regular_client(engine_endpoint.url)
    lean = lean_client(client, asynchronous=False)
    assert lean is not None and lean.transport is not None
    regular = run(client, calls(table, "regular"))
    ours = run(lean, calls(table, "lean"))
    # the keys differ (one item per path); the answers must not
    assert [(kind, _swap(body, "lean", "regular")) for kind, body in ours] == regular
    kinds = [kind for kind, _ in regular]
    assert kinds == ["ok", "ok", "ConditionalCheckFailedException", "ok", "ok",
                     "ClientError", "ResourceNotFoundException"]  # fmt: skip
    failed = ours[2][1]
    assert failed["Item"]["tk"] == {"N": "3"} and failed["Item"]["b"] == {"B": b"\x00\xff"}
    lean.close()


def _swap(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return value.replace(old, new) if isinstance(value, str) else value


def test_async_lean_answers_like_the_regular_client(
    engine_endpoint: EngineEndpoint, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiobotocore.session import get_session

    for name, value in engine_endpoint.env.items():
        monkeypatch.setenv(name, value)
    regular = run(regular_client(engine_endpoint.url), calls(table, "sync"))

    async def through_async_lean() -> list[tuple[str, dict[str, Any]]]:
        kwargs = client_kwargs("us-east-1", engine_endpoint.url, 10.0)
        async with get_session().create_client("dynamodb", **kwargs) as client:
            lean = lean_client(client, asynchronous=True)
            assert lean is not None and lean.transport is not None
            rows = []
            for op, params in calls(table, "asyn"):
                try:
                    rows.append(("ok", comparable(await getattr(lean, op)(**params))))
                except ClientError as error:
                    rows.append((type(error).__name__, comparable(dict(error.response))))
            lean.close()
            return rows

    ours = asyncio.run(through_async_lean())
    assert [(k, _swap(b, "asyn", "sync")) for k, b in ours] == regular


@pytest.fixture
def emulator(engine_endpoint: EngineEndpoint) -> Iterator[PartitionEmulator]:
    with PartitionEmulator(engine_endpoint.url, writes_per_second=2) as emu:
        yield emu


def test_throttling_through_the_emulator_is_the_same_error(
    engine_endpoint: EngineEndpoint,
    table: str,
    emulator: PartitionEmulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in engine_endpoint.env.items():
        monkeypatch.setenv(name, value)
    client = regular_client(emulator.endpoint_url)
    lean = lean_client(client, asynchronous=False)
    assert lean is not None
    write = {"TableName": table, "Item": {**key("hot"), "tk": {"N": "1"}}}
    answers: dict[str, list[tuple[str, dict[str, Any]]]] = {"regular": [], "lean": []}
    for path, target in (("regular", client), ("lean", lean)):
        emulator.reset()
        put = target.put_item
        for _ in range(40):  # a loaded machine refills the bucket between some calls
            answers[path].append(outcome(lambda: put(**write)))  # noqa: B023
            if answers[path][-1][0] != "ok":
                break
    for rows in answers.values():
        assert rows[-1][0] == "ProvisionedThroughputExceededException"
    assert answers["lean"][-1] == answers["regular"][-1]
    lean.close()
