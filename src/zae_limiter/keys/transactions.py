"""Transaction parts any item can use, and the condition that an item is as it was read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zae_limiter.keys.core import PK, Item


def transact(items: Sequence[dict[str, Any]], token: str | None = None) -> dict[str, Any]:
    """`token` (ClientRequestToken): DynamoDB applies a repeat of the same request once
    within 10 minutes, so a transaction that must never apply twice may be sent again."""
    params: dict[str, Any] = {"TransactItems": list(items)}
    if token is not None:
        params["ClientRequestToken"] = token
    return params


def tx_update(update: Mapping[str, Any]) -> dict[str, Any]:
    """An UpdateItem's parameters as a transaction part (a part returns no values, but
    one whose condition fails may still return the item it found)."""
    body = {k: v for k, v in update.items() if k != "ReturnValues"}
    return {"Update": body}


def tx_put(
    table: str, item: Item, condition: tuple[str, dict[str, str], dict[str, Any]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"TableName": table, "Item": item}
    _add_condition(body, condition)
    return {"Put": body}


def tx_delete(
    table: str, key: Item, condition: tuple[str, dict[str, str], dict[str, Any]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"TableName": table, "Key": key}
    _add_condition(body, condition)
    return {"Delete": body}


def _add_condition(
    body: dict[str, Any], condition: tuple[str, dict[str, str], dict[str, Any]] | None
) -> None:
    if condition is None:
        return
    expression, names, values = condition
    body["ConditionExpression"] = expression
    body["ExpressionAttributeNames"] = names
    if values:
        body["ExpressionAttributeValues"] = values


Condition = tuple[str, dict[str, str], dict[str, Any]]


def unchanged(before: Mapping[str, Any] | None, attrs: Sequence[str]) -> Condition:
    """A condition that holds only while the item is as it was read.

    Absent before: the item must still be absent. Present: it must exist and each of
    `attrs` (scalar attributes: S, N or BOOL) must hold the value read, or still be absent.
    """
    names = {"#pk": PK}
    if before is None:
        return "attribute_not_exists(#pk)", names, {}
    parts = ["attribute_exists(#pk)"]
    values: dict[str, Any] = {}
    for i, attr in enumerate(attrs):
        names[f"#a{i}"] = attr
        if attr in before:
            values[f":v{i}"] = before[attr]
            parts.append(f"#a{i} = :v{i}")
        else:
            parts.append(f"attribute_not_exists(#a{i})")
    return " AND ".join(parts), names, values


__all__ = [
    "Condition",
    "transact",
    "tx_delete",
    "tx_put",
    "tx_update",
    "unchanged",
]
