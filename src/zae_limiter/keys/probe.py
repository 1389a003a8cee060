"""`zae-limiter doctor`'s dry probe of the client's permissions: requests the acquire path
makes, on a key it reads anyway, that are sure to change nothing.

A write's condition can never hold (an attribute both exists and does not), so DynamoDB
answers `ConditionalCheckFailedException` when the caller may write, and
`AccessDeniedException` when it may not, and nothing is written either way.
"""

from __future__ import annotations

from typing import Any

from zae_limiter.keys.core import PK, Item

#: True of no item: the write it guards is evaluated (and authorised) but never applied.
NEVER = "attribute_exists(#pk) AND attribute_not_exists(#pk)"


def probe_get(table: str, key: Item) -> dict[str, Any]:
    return {"TableName": table, "Key": key}


def probe_batch_get(table: str, key: Item) -> dict[str, Any]:
    return {"RequestItems": {table: {"Keys": [key]}}}


def probe_update(table: str, key: Item) -> dict[str, Any]:
    """An UpdateItem that is refused by its condition (it would only remove `#pk`)."""
    return {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "REMOVE #never",
        "ConditionExpression": NEVER,
        "ExpressionAttributeNames": {"#pk": PK, "#never": "doctor_never_written"},
    }


def probe_put(table: str, key: Item) -> dict[str, Any]:
    """A PutItem of the bare key that is refused by its condition."""
    return {
        "TableName": table,
        "Item": dict(key),
        "ConditionExpression": NEVER,
        "ExpressionAttributeNames": {"#pk": PK},
    }


__all__ = [
    "NEVER",
    "probe_batch_get",
    "probe_get",
    "probe_put",
    "probe_update",
]
