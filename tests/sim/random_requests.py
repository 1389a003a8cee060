"""Random conditional writes, seeded: a differential test of the expression evaluator.

Each request draws a condition (comparisons, BETWEEN, IN, functions, AND/OR/NOT) and an
update (SET with arithmetic and functions, REMOVE, ADD, DELETE) over a few attributes of
every type, on a handful of items, so that types mismatch, attributes go missing and
conditions fail often. The conformance test runs them on DynamoDB Local and the engine.
"""

from __future__ import annotations

import random
from typing import Any

Request = tuple[str, dict[str, Any]]

ATTRS = ("n1", "n2", "s1", "ss", "ns", "l", "m", "b")
VALUES: tuple[dict[str, Any], ...] = (
    {"N": "0"},
    {"N": "1"},
    {"N": "-3"},
    {"N": "2.5"},
    {"N": "100"},
    {"S": "ab"},
    {"S": "a"},
    {"S": "b"},
    {"SS": ["a", "b"]},
    {"SS": ["c"]},
    {"NS": ["1", "2"]},
    {"L": [{"N": "1"}]},
    {"M": {"k": {"N": "1"}}},
    {"BOOL": True},
)
TYPES = ("S", "N", "SS", "NS", "L", "M", "BOOL")


class _Builder:
    """Placeholders for one request."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attr: str | None = None) -> str:
        attr = attr or self.rnd.choice(ATTRS)
        key = f"#{attr}"
        self.names[key] = attr
        return key

    def value(self, value: dict[str, Any] | None = None) -> str:
        key = f":v{len(self.values)}"
        self.values[key] = value or self.rnd.choice(VALUES)
        return key

    def condition(self, depth: int = 0) -> str:
        roll = self.rnd.random()
        if depth < 2 and roll < 0.3:
            joiner = self.rnd.choice([" AND ", " OR "])
            return f"({self.condition(depth + 1)}{joiner}{self.condition(depth + 1)})"
        if depth < 2 and roll < 0.4:
            return f"NOT {self.condition(depth + 1)}"
        return self.predicate()

    def predicate(self) -> str:
        kind = self.rnd.randrange(9)
        path = self.name()
        if kind == 0:
            return f"attribute_exists({path})"
        if kind == 1:
            return f"attribute_not_exists({path})"
        if kind == 2:
            return f"{path} BETWEEN {self.value({'N': '0'})} AND {self.value({'N': '50'})}"
        if kind == 3:
            return f"{path} IN ({self.value()}, {self.value()})"
        if kind == 4:
            return f"begins_with({path}, {self.value({'S': self.rnd.choice(['a', 'b'])})})"
        if kind == 5:
            return f"contains({path}, {self.value()})"
        if kind == 6:
            op = self.rnd.choice(["=", "<", ">="])
            return f"size({path}) {op} {self.value({'N': str(self.rnd.randrange(3))})}"
        if kind == 7:
            return f"attribute_type({path}, {self.value({'S': self.rnd.choice(TYPES)})})"
        op = self.rnd.choice(["=", "<>", "<", "<=", ">", ">="])
        return f"{path} {op} {self.value()}"

    def update(self) -> str:
        targets = self.rnd.sample(ATTRS, self.rnd.randint(1, 3))
        clauses: dict[str, list[str]] = {}
        for attr in targets:
            clause, action = self.action(attr)
            clauses.setdefault(clause, []).append(action)
        return " ".join(f"{clause} {', '.join(actions)}" for clause, actions in clauses.items())

    def action(self, attr: str) -> tuple[str, str]:
        path = self.name(attr)
        kind = self.rnd.randrange(8)
        if kind == 0:
            return "REMOVE", path
        if kind == 1:
            return "ADD", f"{path} {self.value()}"
        if kind == 2:
            return "DELETE", f"{path} {self.value()}"
        if kind == 3:
            return "SET", f"{path} = {path} + {self.value()}"
        if kind == 4:
            return "SET", f"{path} = if_not_exists({path}, {self.value()}) - {self.value()}"
        if kind == 5:
            return "SET", f"{path} = list_append({path}, {self.value({'L': [{'S': 'x'}]})})"
        if kind == 6:
            return "SET", f"{path} = {self.name()}"
        return "SET", f"{path} = {self.value()}"


def _key(rnd: random.Random) -> dict[str, Any]:
    return {"PK": {"S": f"r{rnd.randrange(4)}"}, "SK": {"S": f"#S{rnd.randrange(2)}"}}


def _placeholders(params: dict[str, Any], built: _Builder) -> dict[str, Any]:
    if built.names:
        params["ExpressionAttributeNames"] = built.names
    if built.values:
        params["ExpressionAttributeValues"] = built.values
    return params


def _update(rnd: random.Random, table: str) -> dict[str, Any]:
    built = _Builder(rnd)
    params: dict[str, Any] = {"TableName": table, "Key": _key(rnd)}
    if rnd.random() < 0.8:
        params["UpdateExpression"] = built.update()
    if rnd.random() < 0.7:
        params["ConditionExpression"] = built.condition()
        params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return _placeholders(params, built)


def _put_or_delete(rnd: random.Random, table: str) -> Request:
    built = _Builder(rnd)
    if rnd.random() < 0.6:
        item = {**_key(rnd), **{a: rnd.choice(VALUES) for a in rnd.sample(ATTRS, 3)}}
        for index in ("GSI1", "GSI2"):
            if rnd.random() < 0.5:
                # Unique index sort keys: the order of ties is not specified.
                item[f"{index}PK"] = {"S": f"g{rnd.randrange(2)}"}
                item[f"{index}SK"] = {"S": item["PK"]["S"] + item["SK"]["S"]}
        params: dict[str, Any] = {"TableName": table, "Item": item}
        op = "put_item"
    else:
        params = {"TableName": table, "Key": _key(rnd)}
        op = "delete_item"
    params["ReturnValues"] = rnd.choice(["NONE", "ALL_OLD"])
    if rnd.random() < 0.6:
        params["ConditionExpression"] = built.condition()
        params["ReturnValuesOnConditionCheckFailure"] = rnd.choice(["NONE", "ALL_OLD"])
    return op, _placeholders(params, built)


def _index_query(rnd: random.Random, table: str) -> Request:
    index = rnd.choice(["GSI1", "GSI2"])
    group = f"g{rnd.randrange(2)}"
    built = _Builder(rnd)
    pk = built.value({"S": group})
    condition = f"{index}PK = {pk}"
    if rnd.random() < 0.5:
        bound = built.value({"S": rnd.choice(["r1", "r2#S1", "r3"])})
        condition += rnd.choice(
            [f" AND {index}SK > {bound}", f" AND begins_with({index}SK, {bound})"]
        )
    params: dict[str, Any] = {
        "TableName": table,
        "IndexName": index,
        "KeyConditionExpression": condition,
        "Limit": rnd.randint(1, 3),
        "ScanIndexForward": rnd.random() < 0.5,
    }
    if rnd.random() < 0.5:
        key = _key(rnd)
        params["ExclusiveStartKey"] = {
            **key,
            f"{index}PK": {"S": group},
            f"{index}SK": {"S": key["PK"]["S"] + key["SK"]["S"]},
        }
    if rnd.random() < 0.3:
        params["FilterExpression"] = built.condition()
    return "query", _placeholders(params, built)


def _read(rnd: random.Random, table: str) -> Request:
    if rnd.random() < 0.3:
        return _index_query(rnd, table)
    built = _Builder(rnd)
    params: dict[str, Any] = {"TableName": table}
    if rnd.random() < 0.5:
        pk = built.value({"S": f"r{rnd.randrange(4)}"})
        params["KeyConditionExpression"] = f"PK = {pk}"
        op = "query"
        params["ScanIndexForward"] = rnd.random() < 0.5
    else:
        op = "scan"
    if rnd.random() < 0.7:
        params["FilterExpression"] = built.condition()
    if rnd.random() < 0.5:
        params["ProjectionExpression"] = ", ".join(
            built.name(a) for a in rnd.sample(ATTRS, rnd.randint(1, 3))
        )
    if op == "query" and rnd.random() < 0.4:
        params["Limit"] = 1
    return op, _placeholders(params, built)


def _batch(rnd: random.Random, table: str) -> Request:
    keys = {repr(k): k for k in (_key(rnd) for _ in range(rnd.randint(1, 4)))}
    if rnd.random() < 0.5:
        built = _Builder(rnd)
        request: dict[str, Any] = {
            "Keys": list(keys.values()),
            "ConsistentRead": rnd.random() < 0.5,
        }
        if rnd.random() < 0.5:
            request["ProjectionExpression"] = ", ".join(built.name(a) for a in rnd.sample(ATTRS, 2))
        return "batch_get_item", {"RequestItems": {table: _placeholders(request, built)}}
    writes = [
        {"PutRequest": {"Item": {**k, rnd.choice(ATTRS): rnd.choice(VALUES)}}}
        if rnd.random() < 0.6
        else {"DeleteRequest": {"Key": k}}
        for k in keys.values()
    ]
    return "batch_write_item", {"RequestItems": {table: writes}}


def _transaction(rnd: random.Random, table: str) -> Request:
    parts: list[dict[str, Any]] = []
    keys: set[str] = set()
    for _ in range(rnd.randint(1, 3)):
        body = _update(rnd, table)
        key = repr(body["Key"])
        if key in keys:
            continue
        keys.add(key)
        if "UpdateExpression" in body:
            parts.append({"Update": body})
        elif "ConditionExpression" in body:
            parts.append({"ConditionCheck": body})
    if not parts:
        parts.append({"Delete": {"TableName": table, "Key": _key(rnd)}})
    return "transact_write_items", {"TransactItems": parts}


def random_requests(
    table: str, count: int = 150, seed: int = 20261128, mixed: bool = False
) -> list[Request]:
    """`mixed`: puts, deletes, queries, scans and transactions among the updates."""
    rnd = random.Random(seed)
    out: list[Request] = []
    for _ in range(count):
        roll = rnd.random() if mixed else 1.0
        if roll < 0.15:
            out.append(_put_or_delete(rnd, table))
        elif roll < 0.3:
            out.append(_read(rnd, table))
        elif roll < 0.4:
            out.append(_transaction(rnd, table))
        elif roll < 0.45:
            out.append(_batch(rnd, table))
        else:
            params = _update(rnd, table)
            params["ReturnValues"] = rnd.choice(
                ["NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"]
            )
            out.append(("update_item", params))
        if rnd.random() < 0.1:
            key = _key(rnd)
            out.append(("get_item", {"TableName": table, "Key": key, "ConsistentRead": True}))
    return out
