"""Entity updates that reach its bucket shards: a new cascade flag or parent."""

from __future__ import annotations

from typing import Any

from zae_limiter.keys.core import A_CASCADE, A_PARENT, PK, Item, s


def bucket_relink(table: str, bucket: Item, cascade: bool, parent_id: str | None) -> dict[str, Any]:
    """Point an existing bucket shard at its entity's new cascade and parent.

    Neither attribute is an index key, so this never writes to an index.
    """
    names = {"#pk": PK, "#c": A_CASCADE, "#p": A_PARENT}
    values: dict[str, Any] = {":c": {"BOOL": cascade}}
    if parent_id is None:
        update = "SET #c = :c REMOVE #p"
    else:
        update = "SET #c = :c, #p = :p"
        values[":p"] = s(parent_id)
    return {
        "TableName": table,
        "Key": bucket,
        "UpdateExpression": update,
        "ConditionExpression": "attribute_exists(#pk)",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


__all__ = [
    "bucket_relink",
]
