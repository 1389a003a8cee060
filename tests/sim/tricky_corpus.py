"""Hand-made requests where DynamoDB's semantics are easy to get wrong.

Each case is a list of (op, params) on a fresh table of the library's shape; the
conformance test runs it on DynamoDB Local and on the engine and compares; the unit
tests run a few on the engine alone with asserted answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.sim.random_requests import random_requests
from zae_limiter import table as table_def

Request = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[str], list[Request]]

    def requests(self, table: str) -> list[Request]:
        return [("create_table", table_def.create_table_params(table)), *self.build(table)]


def s(text: str) -> dict[str, str]:
    return {"S": text}


def n(number: int | str) -> dict[str, str]:
    return {"N": str(number)}


def key(pk: str, sk: str = "#STATE") -> dict[str, Any]:
    return {"PK": s(pk), "SK": s(sk)}


def put(table: str, pk: str, sk: str = "#STATE", **attrs: Any) -> Request:
    return ("put_item", {"TableName": table, "Item": {**key(pk, sk), **attrs}})


def update(
    table: str,
    pk: str,
    expr: str,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
    **extra: Any,
) -> Request:
    params: dict[str, Any] = {"TableName": table, "Key": key(pk), "UpdateExpression": expr}
    if names:
        params["ExpressionAttributeNames"] = names
    if values:
        params["ExpressionAttributeValues"] = values
    return ("update_item", {**params, **extra})


def get(table: str, pk: str, sk: str = "#STATE") -> Request:
    return ("get_item", {"TableName": table, "Key": key(pk, sk), "ConsistentRead": True})


def _conditions(t: str) -> list[Request]:
    cond = [
        ("#a < :v", {"#a": "a"}),  # a missing: false
        ("#a <> :v", {"#a": "a"}),  # a missing: true
        ("#s < :v", {"#s": "s"}),  # S against N: false, not an error
        ("#s = :v", {"#s": "s"}),  # different types: false
        ("#s <> :v", {"#s": "s"}),  # different types: true
        ("NOT #x = :v OR #x = :v AND #s = :v", {"#x": "x", "#s": "s"}),  # NOT > AND > OR
        ("(NOT #x = :v OR #x = :v) AND #s = :v", {"#x": "x", "#s": "s"}),
        ("#x IN (:v, :w)", {"#x": "x"}),
        ("#x BETWEEN :v AND :w", {"#x": "x"}),
        ("size(#s) = :v", {"#s": "s"}),
        ("contains(#s, :t) AND begins_with(#s, :t)", {"#s": "s"}),
        ("attribute_type(#x, :ty)", {"#x": "x"}),
    ]
    out: list[Request] = [put(t, "c", s=s("hello"), x=n(3))]
    for i, (expr, names) in enumerate(cond):
        values: dict[str, Any] = {":v": n(5)}
        if ":w" in expr:
            values[":w"] = n(7 if "BETWEEN" in expr else 3)
        if ":t" in expr:
            values = {":t": s("he")}
        if ":ty" in expr:
            values = {":ty": s("N")}
        out.append(
            update(
                t,
                "c",
                "SET #z = :z",
                {**names, "#z": f"z{i}"},
                {**values, ":z": n(i)},
                ConditionExpression=expr,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        )
    out.append(get(t, "c"))
    return out


def _adds(t: str) -> list[Request]:
    names = {"#c": "count", "#t": "tags"}
    return [
        update(t, "new", "ADD #c :one", {"#c": "count"}, {":one": n(1)}, ReturnValues="ALL_NEW"),
        update(
            t,
            "new",
            "ADD #c :one, #t :tags",
            names,
            {":one": n(2), ":tags": {"SS": ["a", "b"]}},
            ReturnValues="UPDATED_OLD",
        ),
        update(
            t,
            "new",
            "DELETE #t :tags",
            {"#t": "tags"},
            {":tags": {"SS": ["a", "b"]}},
            ReturnValues="UPDATED_NEW",
        ),
        update(t, "new", "SET #m = #m + :one", {"#m": "missing"}, {":one": n(1)}),
        update(
            t,
            "new",
            "SET #m = if_not_exists(#m, :zero) + :one, #l = :list",
            {"#m": "m", "#l": "l"},
            {":zero": n(10), ":one": n(1), ":list": {"L": [n(1)]}},
            ReturnValues="UPDATED_NEW",
        ),
        update(
            t,
            "new",
            "SET #l = list_append(#l, :more) REMOVE #c",
            {"#l": "l", "#c": "count"},
            {":more": {"L": [s("x")]}},
            ReturnValues="ALL_OLD",
        ),
        update(t, "new", "SET #c = :s ADD #c :one", {"#c": "count"}, {":s": n(1), ":one": n(1)}),
        update(t, "new", "ADD #s :one", {"#s": "str"}, {":one": s("x")}),
        update(t, "new", "SET PK = :v", None, {":v": s("other")}),
        update(t, "gone", "REMOVE #c", {"#c": "count"}, ReturnValues="ALL_NEW"),
        get(t, "new"),
        get(t, "gone"),
    ]


def _numbers(t: str) -> list[Request]:
    return [
        put(
            t,
            "num",
            a=n("1.50"),
            b=n("-0"),
            c=n("1e3"),
            d=n("0.1"),
            e=n("123456789012345678901234567890"),
        ),
        update(
            t,
            "num",
            "SET #d = #d + :x, #e = #e - :y, #a = :neg",
            {"#d": "d", "#e": "e", "#a": "a"},
            {":x": n("0.2"), ":y": n("-1"), ":neg": n("-1.0")},
            ReturnValues="ALL_NEW",
        ),
        update(
            t,
            "num",
            "SET #z = :z",
            {"#z": "z", "#c": "c"},
            {":z": n(1), ":w": n(2)},
            ConditionExpression="#c = :w",
        ),
        get(t, "num"),
    ]


def _failures(t: str) -> list[Request]:
    cond = {
        "ConditionExpression": "attribute_not_exists(#pk)",
        "ExpressionAttributeNames": {"#pk": "PK"},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return [
        put(t, "f", v=n(1)),
        ("put_item", {"TableName": t, "Item": {**key("f"), "v": n(2)}, **cond}),
        (
            "delete_item",
            {
                "TableName": t,
                "Key": key("f"),
                "ReturnValues": "ALL_OLD",
                "ConditionExpression": "#v > :v",
                "ExpressionAttributeNames": {"#v": "v"},
                "ExpressionAttributeValues": {":v": n(1)},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        (
            "delete_item",
            {
                "TableName": t,
                "Key": key("absent"),
                "ConditionExpression": "attribute_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": "PK"},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        ("put_item", {"TableName": t, "Item": {**key("f"), "v": n(3)}, "ReturnValues": "ALL_OLD"}),
        ("delete_item", {"TableName": t, "Key": key("f"), "ReturnValues": "ALL_OLD"}),
        ("delete_item", {"TableName": t, "Key": key("f"), "ReturnValues": "ALL_OLD"}),
    ]


def _transactions(t: str) -> list[Request]:
    exists = {
        "ConditionExpression": "attribute_exists(#pk)",
        "ExpressionAttributeNames": {"#pk": "PK"},
    }
    tx: dict[str, Any] = {
        "TransactItems": [
            {"Put": {"TableName": t, "Item": {**key("t1"), "v": n(1)}}},
            {
                "Update": {
                    "TableName": t,
                    "Key": key("t2"),
                    "UpdateExpression": "ADD #v :one",
                    "ExpressionAttributeNames": {"#v": "v", "#pk": "PK"},
                    "ExpressionAttributeValues": {":one": n(1)},
                    "ConditionExpression": "attribute_exists(#pk) AND #v > :one",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {"ConditionCheck": {"TableName": t, "Key": key("t3"), **exists}},
            {"Delete": {"TableName": t, "Key": key("t4")}},
        ]
    }
    token = {
        "ClientRequestToken": "token-1",
        "TransactItems": [
            {
                "Update": {
                    "TableName": t,
                    "Key": key("t2"),
                    "UpdateExpression": "ADD #v :one",
                    "ExpressionAttributeNames": {"#v": "v"},
                    "ExpressionAttributeValues": {":one": n(1)},
                }
            },
        ],
    }
    twice = {
        "TransactItems": [
            {"Put": {"TableName": t, "Item": {**key("t1"), "v": n(1)}}},
            {"Delete": {"TableName": t, "Key": key("t1")}},
        ]
    }
    return [
        put(t, "t2", v=n(1)),
        put(t, "t3"),
        put(t, "t4"),
        ("transact_write_items", tx),
        get(t, "t1"),
        get(t, "t4"),
        ("transact_write_items", token),
        ("transact_write_items", token),
        get(t, "t2"),
        ("transact_write_items", twice),
    ]


def _gsi_pages(t: str) -> list[Request]:
    out: list[Request] = []
    for i in range(7):
        out.append(
            put(
                t,
                f"ns/BUCKET#e{i}#r#0",
                GSI4PK=s("ns"),
                GSI4SK=s(f"BUCKET#{i:02d}"),
                GSI1PK=s("p"),
                GSI1SK=s(f"c{i % 3}{i}"),
                tc=n(i),
            )
        )
    base = {
        "TableName": t,
        "IndexName": "GSI4",
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :pre)",
        "ExpressionAttributeNames": {"#pk": "GSI4PK", "#sk": "GSI4SK"},
        "ExpressionAttributeValues": {":pk": s("ns"), ":pre": s("BUCKET#")},
        "Limit": 3,
    }
    out.append(("query", base))
    start = {**key("ns/BUCKET#e2#r#0"), "GSI4PK": s("ns"), "GSI4SK": s("BUCKET#02")}
    out.append(("query", {**base, "ExclusiveStartKey": start}))
    last = {**key("ns/BUCKET#e5#r#0"), "GSI4PK": s("ns"), "GSI4SK": s("BUCKET#05")}
    out.append(("query", {**base, "ExclusiveStartKey": last}))
    out.append(("query", {**base, "ScanIndexForward": False, "Limit": 7}))
    out.append(("query", {**base, "Select": "COUNT"}))
    out.append(
        (
            "query",
            {
                "TableName": t,
                "IndexName": "GSI1",
                "KeyConditionExpression": "GSI1PK = :p AND GSI1SK BETWEEN :lo AND :hi",
                "ExpressionAttributeValues": {
                    ":p": s("p"),
                    ":lo": s("c0"),
                    ":hi": s("c1z"),
                    ":t": n(2),
                },
                "FilterExpression": "tc >= :t",
                "ProjectionExpression": "PK, tc",
            },
        )
    )
    out.append(
        (
            "query",
            {
                "TableName": t,
                "KeyConditionExpression": "PK = :p",
                "ExpressionAttributeValues": {":p": s("ns/BUCKET#e1#r#0")},
                "Limit": 1,
            },
        )
    )
    out.append(
        (
            "scan",
            {
                "TableName": t,
                "FilterExpression": "tc > :t",
                "ExpressionAttributeValues": {":t": n(4)},
                "ProjectionExpression": "tc",
            },
        )
    )
    return out


def _invalid(t: str) -> list[Request]:
    return [
        put(t, "v", a=n(1)),
        update(t, "v", "SET #a = :one", {"#a": "a", "#b": "b"}, {":one": n(1)}),
        update(t, "v", "SET #a = :one", {"#a": "a"}, {":one": n(1), ":two": n(2)}),
        update(t, "v", "SET #a = :one, #a = :two", {"#a": "a"}, {":one": n(1), ":two": n(2)}),
        update(t, "v", "SET #a = :one ADD #a :one", {"#a": "a"}, {":one": n(1)}),
        update(t, "v", "SET #a = :nope", {"#a": "a"}, {":one": n(1)}),
        update(
            t,
            "v",
            "SET #a = :one",
            {"#a": "a"},
            {":one": n(1), ":two": n(2)},
            ConditionExpression="#a BETWEEN :two AND :one",
        ),
        ("get_item", {"TableName": t, "Key": {"PK": s("v")}}),
        ("get_item", {"TableName": "no-such-table-here", "Key": key("v")}),
    ]


def _batches(t: str) -> list[Request]:
    return [
        (
            "batch_write_item",
            {
                "RequestItems": {
                    t: [
                        {"PutRequest": {"Item": {**key("b1"), "v": n(1)}}},
                        {"PutRequest": {"Item": {**key("b2"), "v": n(2), "w": s("x")}}},
                        {"PutRequest": {"Item": {**key("b3"), "v": n(3)}}},
                    ]
                }
            },
        ),
        (
            "batch_write_item",
            {
                "RequestItems": {
                    t: [
                        {"DeleteRequest": {"Key": key("b3")}},
                        {"PutRequest": {"Item": {**key("b4")}}},
                    ]
                }
            },
        ),
        (
            "batch_get_item",
            {
                "RequestItems": {
                    t: {
                        "Keys": [key("b1"), key("b2"), key("b3")],
                        "ConsistentRead": True,
                        "ProjectionExpression": "#v, SK",
                        "ExpressionAttributeNames": {"#v": "v"},
                    }
                }
            },
        ),
    ]


def _edges(t: str) -> list[Request]:
    """Error paths and corners: syntax, undefined names, key conditions, sizes, types."""
    q = {
        "TableName": t,
        "KeyConditionExpression": "PK = :p",
        "ExpressionAttributeValues": {":p": s("e")},
    }
    out: list[Request] = [
        put(t, "e", f"#S{i}", v=n(i), s=s("ab" * i), l={"L": [n(i)]}) for i in range(4)
    ]
    out += [
        ("query", {**q, "Limit": 4}),  # exactly as many as there are
        ("query", {**q, "Limit": 5}),
        ("query", {**q, "ScanIndexForward": False, "Limit": 2}),
        (
            "query",
            {
                **q,
                "Select": "COUNT",
                "FilterExpression": "v > :one",
                "ExpressionAttributeValues": {":p": s("e"), ":one": n(1)},
            },
        ),
        ("query", {**q, "KeyConditionExpression": "PK = :p AND SK <> :p"}),
        ("query", {**q, "KeyConditionExpression": "PK = :p OR SK = :p"}),
        ("query", {**q, "KeyConditionExpression": "SK = :p"}),
        ("query", {**q, "KeyConditionExpression": "PK = :p AND v = :p"}),
        ("query", {**q, "IndexName": "GSI9"}),
        (
            "query",
            {**q, "ProjectionExpression": "#l[0], s", "ExpressionAttributeNames": {"#l": "l"}},
        ),
        (
            "scan",
            {
                "TableName": t,
                "FilterExpression": "size(s) > :two AND size(l) = :one",
                "ExpressionAttributeValues": {":two": n(2), ":one": n(1)},
            },
        ),
        (
            "scan",
            {
                "TableName": t,
                "FilterExpression": "v IN (:a, :b, :c)",
                "ExpressionAttributeValues": {":a": n(0), ":b": n(3), ":c": s("3")},
            },
        ),
        (
            "scan",
            {
                "TableName": t,
                "FilterExpression": "size(v) > :two",
                "ExpressionAttributeValues": {":two": n(2)},
            },
        ),
        update(t, "e", "SET #a = :v", {"#a": "a"}, {":v": n(1)}, ConditionExpression="#zz = :v"),
        update(t, "e", "SET #a = :v", {"#a": "a"}, {":v": n(1)}, ConditionExpression="#a = = :v"),
        update(t, "e", "SET #a = :v", {"#a": "a"}, {":v": n(1)}, ConditionExpression="(#a = :v"),
        update(t, "e", "SET #a = :v,", {"#a": "a"}, {":v": n(1)}),
        update(t, "e", "SET #a :v", {"#a": "a"}, {":v": n(1)}),
        update(t, "e", "ADD #a :v", {"#a": "a"}, {":v": {"L": [n(1)]}}),
        update(t, "e", "DELETE #a :v", {"#a": "a"}, {":v": {"SS": ["x"]}}),
        update(t, "e", "SET #a = :v", {"#a": "a"}, {":v": {"S": ""}}, ReturnValues="ALL_NEW"),
        ("put_item", {"TableName": t, "Item": {**key(""), "v": n(1)}}),
        ("put_item", {"TableName": t, "Item": {**key("g"), "GSI2PK": s("")}}),
        ("put_item", {"TableName": t, "Item": {"PK": s("only")}}),
        ("put_item", {"TableName": t, "Item": {**key("g"), "v": {"NS": ["1", "1.0"]}}}),
        ("put_item", {"TableName": t, "Item": {**key("g"), "v": {"SS": []}}}),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {
                        "Update": {
                            "TableName": t,
                            "Key": key("e", "#S1"),
                            "UpdateExpression": "SET v = w + :o",
                            "ExpressionAttributeValues": {":o": n(1)},
                        }
                    }
                ]
            },
        ),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {
                        "ConditionCheck": {
                            "TableName": t,
                            "Key": key("e", "#S1"),
                            "ConditionExpression": "v = :o",
                            "ExpressionAttributeValues": {":o": n(1)},
                        }
                    },
                    {"Put": {"TableName": t, "Item": {**key("after-check"), "v": n(1)}}},
                ]
            },
        ),
        (
            "batch_write_item",
            {
                "RequestItems": {
                    t: [{"PutRequest": {"Item": {**key(f"many{i}")}}} for i in range(26)]
                }
            },
        ),
        ("get_item", {"TableName": t, "Key": key("e", "#S2"), "ProjectionExpression": "v, nope"}),
        ("delete_item", {"TableName": t, "Key": key("e", "#S3"), "ReturnValues": "ALL_NEW"}),
    ]
    return out


def corpus() -> list[Case]:
    return [
        Case("conditions", _conditions),
        Case("add_and_set", _adds),
        Case("numbers", _numbers),
        Case("failed_conditions", _failures),
        Case("transactions", _transactions),
        Case("gsi_pages", _gsi_pages),
        Case("invalid", _invalid),
        Case("batches", _batches),
        Case("edges", _edges),
        Case("random", random_requests),
        Case("random_mixed", lambda t: random_requests(t, count=300, seed=21, mixed=True)),
    ]
