"""The engine fixtures serve real DynamoDB: create the library's table, write, read back."""

from __future__ import annotations

import boto3
import pytest

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import keys
from zae_limiter.table import INDEXES, create_table_params

pytestmark = pytest.mark.engine


def test_table_round_trip(engine_endpoint: EngineEndpoint) -> None:
    client = engine_endpoint.client()
    name = unique_name()
    client.create_table(**create_table_params(name))
    try:
        client.get_waiter("table_exists").wait(
            TableName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 50}
        )
        key = {keys.PK: {"S": "test/ENTITY#e1"}, keys.SK: {"S": "#META"}}
        client.put_item(TableName=name, Item={**key, "name": {"S": "one"}})
        got = client.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"]
        assert got["name"] == {"S": "one"}
        described = client.describe_table(TableName=name)["Table"]
        assert described["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        indexes = {i["IndexName"]: i for i in described["GlobalSecondaryIndexes"]}
        assert set(indexes) == {index.name for index in INDEXES}
        for index in INDEXES:
            assert indexes[index.name]["Projection"]["ProjectionType"] == index.projection
    finally:
        client.delete_table(TableName=name)


def test_engine_env_configures_default_clients(engine_env: EngineEndpoint) -> None:
    # No endpoint or credentials passed: everything comes from the environment.
    client = boto3.client("dynamodb")
    assert client.meta.endpoint_url == engine_env.url
    assert "TableNames" in client.list_tables(Limit=1)
