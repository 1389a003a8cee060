"""Each operation of the engine, with its errors, as the library's requests use them."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sim.conftest import TABLE, Tick
from zae_limiter.sim.engine import Engine, EngineClient


def k(pk: str, sk: str = "#STATE") -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def n(value: int | str) -> dict[str, str]:
    return {"N": str(value)}


def error_of(client: Any, op: str, **params: Any) -> dict[str, Any]:
    with pytest.raises(ClientError) as caught:
        getattr(client, op)(TableName=TABLE, **params)
    return dict(caught.value.response)


def test_put_get_delete_with_return_values(client: Any) -> None:
    assert "Attributes" not in client.put_item(
        TableName=TABLE, Item={**k("a"), "v": n(1)}, ReturnValues="ALL_OLD"
    )
    old = client.put_item(TableName=TABLE, Item={**k("a"), "v": n("2.0")}, ReturnValues="ALL_OLD")
    assert old["Attributes"] == {**k("a"), "v": n(1)}
    assert client.get_item(TableName=TABLE, Key=k("a"))["Item"]["v"] == n(2)
    got = client.get_item(
        TableName=TABLE, Key=k("a"), ProjectionExpression="#v", ExpressionAttributeNames={"#v": "v"}
    )
    assert got["Item"] == {"v": n(2)}
    gone = client.delete_item(TableName=TABLE, Key=k("a"), ReturnValues="ALL_OLD")
    assert gone["Attributes"]["v"] == n(2)
    assert "Item" not in client.get_item(TableName=TABLE, Key=k("a"))


def test_update_creates_the_item_and_returns_what_was_asked(client: Any) -> None:
    params = {
        "TableName": TABLE,
        "Key": k("u"),
        "UpdateExpression": "ADD #c :one SET #s = :s",
        "ExpressionAttributeNames": {"#c": "count", "#s": "s"},
        "ExpressionAttributeValues": {":one": n(1), ":s": {"S": "x"}},
    }
    assert client.update_item(**params, ReturnValues="ALL_NEW")["Attributes"] == {
        **k("u"),
        "count": n(1),
        "s": {"S": "x"},
    }
    assert client.update_item(**params, ReturnValues="UPDATED_OLD")["Attributes"] == {
        "count": n(1),
        "s": {"S": "x"},
    }
    assert client.update_item(**params, ReturnValues="UPDATED_NEW")["Attributes"] == {
        "count": n(3),
        "s": {"S": "x"},
    }
    assert "Attributes" not in client.update_item(**params)


def test_a_failed_condition_carries_all_old_when_asked(client: Any) -> None:
    client.put_item(TableName=TABLE, Item={**k("c"), "v": n(5)})
    common = {
        "Key": k("c"),
        "UpdateExpression": "SET #v = :one",
        "ConditionExpression": "#v < :one",
        "ExpressionAttributeNames": {"#v": "v"},
        "ExpressionAttributeValues": {":one": n(1)},
    }
    body = error_of(client, "update_item", **common, ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert body["Error"] == {
        "Code": "ConditionalCheckFailedException",
        "Message": "The conditional request failed",
    }
    assert body["Item"] == {**k("c"), "v": n(5)}
    assert "Item" not in error_of(client, "update_item", **common)
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.update_item(TableName=TABLE, **common)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {
                "Key": k("x"),
                "UpdateExpression": "SET #a = :v",
                "ExpressionAttributeNames": {"#a": "a", "#b": "b"},
                "ExpressionAttributeValues": {":v": n(1)},
            },
            "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b}",
        ),
        (
            {
                "Key": k("x"),
                "UpdateExpression": "SET #a = :v",
                "ExpressionAttributeNames": {"#a": "a"},
                "ExpressionAttributeValues": {":v": n(1), ":w": n(2)},
            },
            "Value provided in ExpressionAttributeValues unused in expressions: keys: {:w}",
        ),
        (
            {
                "Key": k("x"),
                "UpdateExpression": "SET #a = :v",
                "ExpressionAttributeNames": {"#a": "a"},
            },
            "An expression attribute value used in expression is not defined",
        ),
        (
            {"Key": {"PK": {"S": "x"}}, "UpdateExpression": "REMOVE a"},
            "The number of conditions on the keys is invalid",
        ),
        (
            {"Key": {"PK": {"N": "1"}, "SK": {"S": "x"}}, "UpdateExpression": "REMOVE a"},
            "The provided key element does not match the schema",
        ),
        (
            {
                "Key": k("x"),
                "UpdateExpression": "SET GSI1PK = :v",
                "ExpressionAttributeValues": {":v": n(1)},
            },
            "Type mismatch for Index Key",
        ),
        (
            {"Key": k("x"), "UpdateExpression": "REMOVE a", "ReturnValues": "ALL"},
            "Return values set to invalid value",
        ),
    ],
)
def test_invalid_requests(client: Any, params: dict[str, Any], message: str) -> None:
    body = error_of(client, "update_item", **params)
    assert body["Error"]["Code"] == "ValidationException"
    assert message in body["Error"]["Message"]


def test_what_botocore_would_refuse_is_refused_the_same_way(client: Any) -> None:
    from botocore.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="type: int"):
        client.put_item(TableName=TABLE, Item={**k("p"), "v": {"N": 5}})
    with pytest.raises(ParamValidationError):
        client.update_item(
            TableName=TABLE,
            Key=k("p"),
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": 5}},
        )
    client.put_item(TableName=TABLE, Item={**k("p"), "v": n(1)})
    with pytest.raises(ParamValidationError, match="N value 5 is a int"):
        client.update_item(
            TableName=TABLE,
            Key=k("p"),
            UpdateExpression="SET w = :v",
            ConditionExpression="v < :v",
            ExpressionAttributeValues={":v": {"N": 5}},
        )


def test_an_engine_fault_is_not_passed_off_as_a_refused_request(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zae_limiter.sim.engine import engine as module

    def broken(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
        raise TypeError("a bug in the engine")

    monkeypatch.setitem(module._HANDLERS, "get_item", broken)
    with pytest.raises(TypeError, match="a bug in the engine"):
        engine.call("get_item", {"TableName": TABLE, "Key": k("p")})


def test_unknown_tables_and_tables_made_twice(engine: Engine, client: Any) -> None:
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.get_item(TableName="nope", Key=k("a"))
    with pytest.raises(ClientError) as caught:
        client.create_table(**engine.tables[TABLE].params)
    assert caught.value.response["Error"]["Code"] == "ResourceInUseException"


def test_describe_table_says_what_the_library_checks(client: Any) -> None:
    table = client.describe_table(TableName=TABLE)["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert {
        i["IndexName"]: (i["IndexStatus"], i["Projection"]["ProjectionType"])
        for i in table["GlobalSecondaryIndexes"]
    } == {
        "GSI1": ("ACTIVE", "ALL"),
        "GSI2": ("ACTIVE", "KEYS_ONLY"),
        "GSI3": ("ACTIVE", "KEYS_ONLY"),
        "GSI4": ("ACTIVE", "KEYS_ONLY"),
    }
    assert table["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert table["LatestStreamArn"].endswith(table["LatestStreamLabel"])


def test_the_callers_later_changes_do_not_reach_the_engine(engine: Engine, client: Any) -> None:
    item = {**k("m"), "s": {"SS": ["a"]}, "v": n(1)}
    client.put_item(TableName=TABLE, Item=item)
    item["s"]["SS"].append("b")
    item["v"]["N"] = "9"
    got = client.get_item(TableName=TABLE, Key=k("m"))["Item"]
    got["v"]["N"] = "7"
    got["s"]["SS"].append("c")
    assert engine.items(TABLE) == [{**k("m"), "s": {"SS": ["a"]}, "v": n(1)}]


def test_stream_has_one_record_per_change_and_none_for_no_change(
    engine: Engine, client: Any, tick: Tick
) -> None:
    client.put_item(TableName=TABLE, Item={**k("s"), "v": n(1)})
    tick.now_ms += 1500
    add = {
        "TableName": TABLE,
        "Key": k("s"),
        "UpdateExpression": "ADD #v :x",
        "ExpressionAttributeNames": {"#v": "v"},
    }
    client.update_item(**add, ExpressionAttributeValues={":x": n(1)})
    client.update_item(**add, ExpressionAttributeValues={":x": n(0)})  # changes nothing
    client.put_item(TableName=TABLE, Item={**k("s"), "v": n(2)})  # the same item again
    client.delete_item(TableName=TABLE, Key=k("s"))
    client.delete_item(TableName=TABLE, Key=k("s"))  # nothing to delete
    records = engine.records(TABLE)
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    seqs = [r["dynamodb"]["SequenceNumber"] for r in records]
    assert seqs == sorted(seqs) and [int(s) for s in seqs] == sorted(int(s) for s in seqs)
    modify = records[1]["dynamodb"]
    assert modify["OldImage"]["v"] == n(1) and modify["NewImage"]["v"] == n(2)
    assert modify["Keys"] == k("s") and modify["ApproximateCreationDateTime"] == 1_700_000_001
    assert "NewImage" not in records[2]["dynamodb"]


def test_records_read_can_be_forgotten(engine: Engine, client: Any) -> None:
    for i in range(4):
        client.put_item(TableName=TABLE, Item={**k("f"), "v": n(i)})
    first = engine.records(TABLE)
    assert engine.forget_records(TABLE, first[1]["dynamodb"]["SequenceNumber"]) == 2
    assert engine.records(TABLE) == first[2:]
    client.put_item(TableName=TABLE, Item={**k("f"), "v": n(9)})
    assert len(engine.records(TABLE)) == 3
    assert engine.forget_records(TABLE) == 3 and engine.records(TABLE) == []


def test_apply_image_replaces_and_deletes_unconditionally(engine: Engine) -> None:
    engine.apply_image(TABLE, k("r"), {**k("r"), "v": n(3)})
    assert engine.get(TABLE, k("r")) == {**k("r"), "v": n(3)}
    engine.apply_image(TABLE, k("r"), None)
    assert engine.get(TABLE, k("r")) is None
    assert [r["eventName"] for r in engine.records(TABLE)] == ["INSERT", "REMOVE"]


def test_consumed_capacity_as_the_meter_reads_it(client: Any) -> None:
    item = {**k("w"), "GSI2PK": {"S": "r"}, "GSI2SK": {"S": "b"}, "v": n(1)}
    put = client.put_item(TableName=TABLE, Item=item, ReturnConsumedCapacity="INDEXES")
    assert put["ConsumedCapacity"]["Table"]["CapacityUnits"] == 1.0
    assert put["ConsumedCapacity"]["GlobalSecondaryIndexes"] == {"GSI2": {"CapacityUnits": 1.0}}
    assert put["ConsumedCapacity"]["CapacityUnits"] == 2.0
    add = client.update_item(
        TableName=TABLE,
        Key=k("w"),
        UpdateExpression="ADD v :one",
        ExpressionAttributeValues={":one": n(1)},
        ReturnConsumedCapacity="INDEXES",
    )
    assert add["ConsumedCapacity"]["CapacityUnits"] == 1.0  # KEYS_ONLY: no index write
    big = client.put_item(
        TableName=TABLE, Item={**k("big"), "s": {"S": "x" * 3000}}, ReturnConsumedCapacity="TOTAL"
    )
    assert big["ConsumedCapacity"] == {"TableName": TABLE, "CapacityUnits": 3.0}
    read = client.get_item(TableName=TABLE, Key=k("big"), ReturnConsumedCapacity="TOTAL")
    assert read["ConsumedCapacity"]["CapacityUnits"] == 0.5
    assert "ConsumedCapacity" not in client.get_item(TableName=TABLE, Key=k("big"))
    query = client.query(
        TableName=TABLE,
        IndexName="GSI2",
        KeyConditionExpression="GSI2PK = :r",
        ExpressionAttributeValues={":r": {"S": "r"}},
        ReturnConsumedCapacity="INDEXES",
    )
    assert query["ConsumedCapacity"] == {
        "TableName": TABLE,
        "CapacityUnits": 0.5,
        "Table": {"CapacityUnits": 0.0},
        "GlobalSecondaryIndexes": {"GSI2": {"CapacityUnits": 0.5}},
    }
    tx = client.transact_write_items(TransactItems=[tx_add("w")], ReturnConsumedCapacity="TOTAL")
    assert tx["ConsumedCapacity"] == [{"TableName": TABLE, "CapacityUnits": 2.0}]


def put_index_items(client: Any, count: int) -> None:
    for i in range(count):
        client.put_item(
            TableName=TABLE,
            Item={**k(f"p{i}"), "GSI4PK": {"S": "ns"}, "GSI4SK": {"S": f"E#{i:02d}"}, "v": n(i)},
        )


def test_query_pages_through_an_index(client: Any) -> None:
    put_index_items(client, 7)
    params: dict[str, Any] = {
        "TableName": TABLE,
        "IndexName": "GSI4",
        "Limit": 3,
        "KeyConditionExpression": "#p = :p AND begins_with(#s, :e)",
        "ExpressionAttributeNames": {"#p": "GSI4PK", "#s": "GSI4SK"},
        "ExpressionAttributeValues": {":p": {"S": "ns"}, ":e": {"S": "E#"}},
    }
    seen, pages = [], 0
    while True:
        page = client.query(**params)
        pages += 1
        seen.extend(item["GSI4SK"]["S"] for item in page["Items"])
        assert "v" not in (page["Items"] or [{}])[0]  # KEYS_ONLY
        if "LastEvaluatedKey" not in page:
            break
        assert set(page["LastEvaluatedKey"]) == {"PK", "SK", "GSI4PK", "GSI4SK"}
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    assert seen == [f"E#{i:02d}" for i in range(7)] and pages == 3
    back = client.query(
        **{**params, "ScanIndexForward": False, "Limit": 2, "ExclusiveStartKey": page_key(4)}
    )
    assert [i["GSI4SK"]["S"] for i in back["Items"]] == ["E#03", "E#02"]
    del params["ExclusiveStartKey"]
    count = client.query(**{**params, "Select": "COUNT", "Limit": 10})
    assert count["Count"] == 7 and "Items" not in count


def page_key(i: int) -> dict[str, Any]:
    return {**k(f"p{i}"), "GSI4PK": {"S": "ns"}, "GSI4SK": {"S": f"E#{i:02d}"}}


def test_query_key_conditions_and_filters(client: Any) -> None:
    for sk in ("#CONFIG#a", "#CONFIG#b", "#META", "#USAGE#x"):
        client.put_item(TableName=TABLE, Item={**k("e", sk), "v": n(len(sk))})

    def sks(expr: str, **extra: Any) -> list[str]:
        values = {
            ":p": {"S": "e"},
            ":lo": {"S": "#CONFIG#b"},
            ":hi": {"S": "#USAGE"},
            ":c": {"S": "#CONFIG"},
        }
        used = {key: val for key, val in values.items() if key in expr + str(extra)}
        page = client.query(
            TableName=TABLE, KeyConditionExpression=expr, ExpressionAttributeValues=used, **extra
        )
        return [item["SK"]["S"] for item in page["Items"]]

    assert sks("PK = :p AND SK BETWEEN :lo AND :hi") == ["#CONFIG#b", "#META"]
    assert sks("PK = :p AND begins_with(SK, :c)") == ["#CONFIG#a", "#CONFIG#b"]
    assert sks("PK = :p AND SK > :hi") == ["#USAGE#x"]
    assert sks("PK = :p", FilterExpression="begins_with(SK, :c)") == ["#CONFIG#a", "#CONFIG#b"]
    body = error_of(
        client,
        "query",
        KeyConditionExpression="SK = :c",
        ExpressionAttributeValues={":c": {"S": "#META"}},
    )
    assert "missed key schema element" in body["Error"]["Message"]


def test_scan_pages_and_segments(client: Any) -> None:
    put_index_items(client, 5)
    page = client.scan(TableName=TABLE, Limit=2)
    rest = client.scan(TableName=TABLE, ExclusiveStartKey=page["LastEvaluatedKey"])
    assert len(page["Items"]) + len(rest["Items"]) == 5
    segments = [client.scan(TableName=TABLE, Segment=s, TotalSegments=3)["Count"] for s in range(3)]
    assert sum(segments) == 5


def test_batches(client: Any) -> None:
    client.batch_write_item(
        RequestItems={
            TABLE: [
                {"PutRequest": {"Item": {**k("b1"), "v": n(1)}}},
                {"PutRequest": {"Item": {**k("b2"), "v": n(2)}}},
            ]
        }
    )
    got = client.batch_get_item(RequestItems={TABLE: {"Keys": [k("b1"), k("b2"), k("b3")]}})
    assert sorted(i["v"]["N"] for i in got["Responses"][TABLE]) == ["1", "2"]
    assert got["UnprocessedKeys"] == {}
    with pytest.raises(ClientError, match="duplicates"):
        client.batch_get_item(RequestItems={TABLE: {"Keys": [k("b1"), k("b1")]}})
    with pytest.raises(ClientError, match="duplicates"):
        client.batch_write_item(
            RequestItems={
                TABLE: [{"PutRequest": {"Item": k("b1")}}, {"DeleteRequest": {"Key": k("b1")}}]
            }
        )


def tx_add(key: str, condition: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "TableName": TABLE,
        "Key": k(key),
        "UpdateExpression": "ADD #v :one",
        "ExpressionAttributeNames": {"#v": "v"},
        "ExpressionAttributeValues": {":one": n(1)},
    }
    if condition:
        body["ConditionExpression"] = "#v > :one"
        body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Update": body}


def test_a_transaction_is_all_or_nothing(engine: Engine, client: Any) -> None:
    client.put_item(TableName=TABLE, Item={**k("t1"), "v": n(1)})
    with pytest.raises(client.exceptions.TransactionCanceledException) as caught:
        client.transact_write_items(TransactItems=[tx_add("t0"), tx_add("t1", condition=True)])
    body = caught.value.response
    assert body["CancellationReasons"] == [
        {"Code": "None"},
        {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
            "Item": {**k("t1"), "v": n(1)},
        },
    ]
    assert "[None, ConditionalCheckFailed]" in body["Error"]["Message"]
    assert engine.get(TABLE, k("t0")) is None
    with pytest.raises(ClientError, match="multiple operations on one item"):
        client.transact_write_items(TransactItems=[tx_add("t1"), tx_add("t1")])


def test_a_client_request_token_applies_once_for_ten_minutes(
    engine: Engine, client: Any, tick: Tick
) -> None:
    request = {"TransactItems": [tx_add("tok")], "ClientRequestToken": "one"}
    client.transact_write_items(**request)
    client.transact_write_items(**request, ReturnConsumedCapacity="TOTAL")
    assert engine.get(TABLE, k("tok")) == {**k("tok"), "v": n(1)}
    with pytest.raises(client.exceptions.IdempotentParameterMismatchException):
        client.transact_write_items(TransactItems=[tx_add("other")], ClientRequestToken="one")
    tick.now_ms += 10 * 60 * 1000
    client.transact_write_items(**request)
    assert engine.get(TABLE, k("tok")) == {**k("tok"), "v": n(2)}


def test_the_client_is_boto3_shaped_but_not_botocore(engine: Engine) -> None:
    client = EngineClient(engine)
    assert client.put_item.__name__ == "put_item"
    with pytest.raises(AttributeError):
        client.not_an_operation  # noqa: B018
    assert client.exceptions.from_code("ValidationException").__name__ == "ValidationException"
