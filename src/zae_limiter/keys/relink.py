"""Entity updates that reach its bucket shards: a new cascade flag, parent or bypass."""

from __future__ import annotations

from typing import Any

from zae_limiter.keys.core import A_CASCADE, A_PARENT, PK, Item, s
from zae_limiter.keys.entities import A_BYPASS


def bucket_relink(
    table: str, bucket: Item, cascade: bool, parent_id: str | None, bypass: bool = False
) -> dict[str, Any]:
    """Point an existing bucket shard at its entity's new cascade, parent and bypass
    (a client that knows the entity only from its buckets learns them there).

    No attribute here is an index key, so this never writes to an index.
    """
    names = {"#pk": PK, "#c": A_CASCADE, "#p": A_PARENT, "#b": A_BYPASS}
    values: dict[str, Any] = {":c": {"BOOL": cascade}}
    sets, removes = ["#c = :c"], []
    if parent_id is None:
        removes.append("#p")
    else:
        sets.append("#p = :p")
        values[":p"] = s(parent_id)
    if bypass:
        sets.append("#b = :b")
        values[":b"] = {"BOOL": True}
    else:
        removes.append("#b")
    update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
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
