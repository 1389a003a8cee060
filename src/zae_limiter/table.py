"""The table's shape, as data: both `CreateTable` and the CloudFormation template read it.

Bucket items carry the keys of GSI2, GSI3 and GSI4 only, and all three are KEYS_ONLY:
a hot-path write then costs 1 WCU with no index write, and no bucket update lands in a
shared index partition. GSI1 (parent -> children) holds entity records only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from zae_limiter import keys

Projection = Literal["ALL", "KEYS_ONLY"]


@dataclass(frozen=True, slots=True)
class IndexDef:
    name: str
    partition_key: str
    sort_key: str
    projection: Projection


KEY_ATTRIBUTES: tuple[str, ...] = (
    keys.PK,
    keys.SK,
    keys.GSI1PK,
    keys.GSI1SK,
    keys.GSI2PK,
    keys.GSI2SK,
    keys.GSI3PK,
    keys.GSI3SK,
    keys.GSI4PK,
    keys.GSI4SK,
)

INDEXES: tuple[IndexDef, ...] = (
    IndexDef(keys.GSI1, keys.GSI1PK, keys.GSI1SK, "ALL"),
    IndexDef(keys.GSI2, keys.GSI2PK, keys.GSI2SK, "KEYS_ONLY"),
    IndexDef(keys.GSI3, keys.GSI3PK, keys.GSI3SK, "KEYS_ONLY"),
    IndexDef(keys.GSI4, keys.GSI4PK, keys.GSI4SK, "KEYS_ONLY"),
)

STREAM_VIEW_TYPE = "NEW_AND_OLD_IMAGES"
BILLING_MODE = "PAY_PER_REQUEST"
TTL_ATTRIBUTE = keys.TTL


def key_schema(partition_key: str, sort_key: str) -> list[dict[str, str]]:
    return [
        {"AttributeName": partition_key, "KeyType": "HASH"},
        {"AttributeName": sort_key, "KeyType": "RANGE"},
    ]


def attribute_definitions() -> list[dict[str, str]]:
    return [{"AttributeName": name, "AttributeType": "S"} for name in KEY_ATTRIBUTES]


def global_secondary_indexes() -> list[dict[str, Any]]:
    return [
        {
            "IndexName": index.name,
            "KeySchema": key_schema(index.partition_key, index.sort_key),
            "Projection": {"ProjectionType": index.projection},
        }
        for index in INDEXES
    ]


def create_table_params(table_name: str, *, stream: bool = True) -> dict[str, Any]:
    """Arguments for DynamoDB `CreateTable`, straight from the definition above."""
    params: dict[str, Any] = {
        "TableName": table_name,
        "KeySchema": key_schema(keys.PK, keys.SK),
        "AttributeDefinitions": attribute_definitions(),
        "GlobalSecondaryIndexes": global_secondary_indexes(),
        "BillingMode": BILLING_MODE,
    }
    if stream:
        params["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": STREAM_VIEW_TYPE,
        }
    return params
