"""The namespace index (GSI4): every item of a namespace, and what each entry is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zae_limiter.keys.core import GSI4, GSI4PK, GSI4SK, PK, SK, Item, get_s, s


def namespace_query_keys(table: str, ns: str, start: Item | None = None) -> dict[str, Any]:
    """One page of every item key of a namespace (GSI4, KEYS_ONLY)."""
    params: dict[str, Any] = {
        "TableName": table,
        "IndexName": GSI4,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": GSI4PK},
        "ExpressionAttributeValues": {":pk": s(ns)},
    }
    if start:
        params["ExclusiveStartKey"] = start
    return params


def namespace_scan(table: str) -> dict[str, Any]:
    """The namespace index's partition keys (a Scan of the KEYS_ONLY index)."""
    return {
        "TableName": table,
        "IndexName": GSI4,
        "ProjectionExpression": "#pk",
        "ExpressionAttributeNames": {"#pk": GSI4PK},
    }


def index_kind(item: Mapping[str, Any]) -> str:
    """What an index entry is, from its GSI4 sort key: entity, bucket, usage, audit, config."""
    sort_key = get_s(item, GSI4SK) or ""
    head = sort_key.split("#", 1)[0].lower()
    return "config" if head.endswith("_config") else head


def index_namespace(item: Mapping[str, Any]) -> str:
    return get_s(item, GSI4PK) or ""


def item_key(item: Mapping[str, Any]) -> Item:
    return {PK: item[PK], SK: item[SK]}


__all__ = [
    "index_kind",
    "index_namespace",
    "item_key",
    "namespace_query_keys",
    "namespace_scan",
]
