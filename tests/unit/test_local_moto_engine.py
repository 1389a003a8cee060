"""local/moto_engine.py: GetRecords written out directly reads the same as moto's own answer.

In-process moto goes through the same response handler as moto's server, so the same
records are read twice, through moto's serializer and through `install()`'s, and boto3
must parse the two answers alike (images, keys, event names, record times).
"""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

from zae_limiter.local import moto_engine


def _records(streams: Any, arn: str) -> list[dict[str, Any]]:
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    out: list[dict[str, Any]] = []
    while True:
        answer = streams.get_records(ShardIterator=iterator, Limit=3)
        if not answer["Records"]:
            return out
        out += answer["Records"]
        iterator = answer["NextShardIterator"]


def test_get_records_written_directly_parses_as_motos_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DynamoDBStreamsHandler, "get_records", DynamoDBStreamsHandler.get_records)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        arn = ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        for i in range(5):
            listed = {"L": [{"S": "x"}, {"BOOL": True}, {"NULL": True}]}
            item = {
                "PK": {"S": "a"}, "n": {"N": str(10**20 + i)}, "m": {"M": {"l": listed}},
                "b": {"B": b"\x00\x01"}, "bs": {"BS": [b"\xff"]},
            }  # fmt: skip
            ddb.put_item(TableName="t", Item=item)
        ddb.delete_item(TableName="t", Key={"PK": {"S": "a"}})
        theirs = _records(streams, arn)
        moto_engine.install()
        ours = _records(streams, arn)
    assert [r["eventName"] for r in ours] == ["INSERT"] + ["MODIFY"] * 4 + ["REMOVE"]
    assert ours == theirs
    created = ours[0]["dynamodb"]["ApproximateCreationDateTime"]
    assert isinstance(created, datetime.datetime)
    assert ours[1]["dynamodb"]["NewImage"]["n"] == {"N": str(10**20 + 1)}


def test_a_record_time_is_epoch_seconds_with_milliseconds() -> None:
    at = datetime.datetime(2026, 11, 28, 10, 0, 0, 123456)
    body = moto_engine.records_body({"Records": [{"dynamodb": {"T": at}}]})
    assert body == '{"Records":[{"dynamodb":{"T":1795860000.123}}]}'
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        moto_engine.records_body({"x": {1}})
