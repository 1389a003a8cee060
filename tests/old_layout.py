"""A table in the OLD layout (schema version 1, before pre-shard buckets), item by item.

Schema 1 kept an entity's buckets in the entity's own partition: PK `{ns}/ENTITY#{id}`,
SK `#BUCKET#{resource}`, with `b_{limit}_{tk,cp,ra,rp,tc}` attributes and GSI2 keys.
Those bucket items and the usage snapshots are spelled out literally below, as the old
release wrote them. Entity records and limit configs did not change between schema 1 and
2, so they are built with today's codecs (and today's client can read them after the
migration). Everything is written with plain boto3 `put_item`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zae_limiter import keys
from zae_limiter import table as table_def
from zae_limiter.limits import Limit
from zae_limiter.models import Entity

NOW_MS = 1_800_000_000_000
Key = tuple[str, str]


@dataclass
class OldTable:
    name: str
    old_buckets: list[Key] = field(default_factory=list)
    kept: list[Key] = field(default_factory=list)

    def old_buckets_by_namespace(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for pk, _sk in self.old_buckets:
            ns = pk.split("/", 1)[0]
            counts[ns] = counts.get(ns, 0) + 1
        return counts


def old_bucket_item(
    ns: str, entity_id: str, resource: str, limits: dict[str, tuple[int, int, int]]
) -> dict[str, Any]:
    """A schema-1 bucket: limits are {name: (tokens, capacity, refill per minute)}."""
    item: dict[str, Any] = {
        "PK": {"S": f"{ns}/ENTITY#{entity_id}"},
        "SK": {"S": f"#BUCKET#{resource}"},
        "entity_id": {"S": entity_id},
        "resource": {"S": resource},
        "rf": {"N": str(NOW_MS - 5_000)},
        "cascade": {"BOOL": False},
        "GSI2PK": {"S": f"{ns}/RESOURCE#{resource}"},
        "GSI2SK": {"S": f"BUCKET#{entity_id}"},
    }
    for name, (tokens, capacity, refill) in limits.items():
        item[f"b_{name}_tk"] = {"N": str(tokens * 1000)}
        item[f"b_{name}_cp"] = {"N": str(capacity * 1000)}
        item[f"b_{name}_ra"] = {"N": str(refill * 1000)}
        item[f"b_{name}_rp"] = {"N": "60000"}
        item[f"b_{name}_tc"] = {"N": str((capacity - tokens) * 1000)}
    return item


def old_usage_item(ns: str, entity_id: str, resource: str, hour: str) -> dict[str, Any]:
    return {
        "PK": {"S": f"{ns}/ENTITY#{entity_id}"},
        "SK": {"S": f"#USAGE#{resource}#hourly#{hour}"},
        "GSI2PK": {"S": f"{ns}/RESOURCE#{resource}"},
        "GSI2SK": {"S": f"USAGE#{entity_id}#hourly#{hour}"},
        "entity_id": {"S": entity_id},
        "resource": {"S": resource},
        "rpm": {"N": "12"},
        "tpm": {"N": "3400"},
        "events": {"N": "12"},
    }


def old_version_item(version: int = 1) -> dict[str, Any]:
    return {
        "PK": {"S": "_/SYSTEM#"},
        "SK": {"S": "#VERSION"},
        "schema_version": {"N": str(version)},
        "min_client_version": {"S": "0.0.0"},
        "updated_at": {"N": str(NOW_MS - 86_400_000)},
        "updated_by": {"S": "zae-limiter 0.0.9 deploy"},
    }


def create_table(client: Any, name: str, indexes: tuple[str, ...] | None = None) -> None:
    params = table_def.create_table_params(name)
    if indexes is not None:
        params["GlobalSecondaryIndexes"] = [
            i for i in params["GlobalSecondaryIndexes"] if i["IndexName"] in indexes
        ]
        used = {"PK", "SK"} | {
            k["AttributeName"] for i in params["GlobalSecondaryIndexes"] for k in i["KeySchema"]
        }
        params["AttributeDefinitions"] = [
            a for a in params["AttributeDefinitions"] if a["AttributeName"] in used
        ]
    client.create_table(**params)


def build_old_table(
    client: Any,
    name: str,
    *,
    version_record: bool = True,
    extra_buckets: int = 0,
    indexes: tuple[str, ...] | None = None,
) -> OldTable:
    """Two namespaces of entities, configs, usage and 5 (+ `extra_buckets`) old buckets."""
    create_table(client, name, indexes)
    table = OldTable(name)

    def put(item: dict[str, Any], bucket: bool = False) -> None:
        client.put_item(TableName=name, Item=item)
        (table.old_buckets if bucket else table.kept).append((item["PK"]["S"], item["SK"]["S"]))

    if version_record:
        put(old_version_item())
    ns = "default"
    put(keys.encode_entity(ns, Entity("org-1", "Org One", None, False, NOW_MS)))
    put(keys.encode_entity(ns, Entity("user-1", "User One", "org-1", True, NOW_MS)))
    put(keys.encode_entity(ns, Entity("user-2", None, None, False, NOW_MS)))
    put(
        keys.config_item(
            keys.system_config_key(ns), [Limit.per_minute("rpm", 100)], ns, NOW_MS, "system_config"
        )
    )
    put(
        keys.config_item(
            keys.resource_config_key(ns, "gpt-4"),
            [Limit.per_minute("rpm", 60), Limit.per_minute("tpm", 10_000)],
            ns,
            NOW_MS,
            "resource_config",
            resource="gpt-4",
        )
    )
    put(
        keys.config_item(
            keys.entity_config_key(ns, "user-1", "gpt-4"),
            [Limit.per_minute("rpm", 10)],
            ns,
            NOW_MS,
            "entity_config",
            entity_id="user-1",
            resource="gpt-4",
        )
    )
    put(old_bucket_item(ns, "user-1", "gpt-4", {"rpm": (7, 10, 10)}), bucket=True)
    put(old_bucket_item(ns, "user-1", "claude", {"rpm": (100, 100, 100)}), bucket=True)
    put(
        old_bucket_item(ns, "user-2", "gpt-4", {"rpm": (1, 60, 60), "tpm": (0, 10_000, 10_000)}),
        bucket=True,
    )
    put(old_bucket_item(ns, "org-1", "gpt-4", {"rpm": (50, 60, 60)}), bucket=True)
    put(old_usage_item(ns, "user-1", "gpt-4", "2027-01-15T10"))
    put(old_usage_item(ns, "user-2", "gpt-4", "2027-01-15T10"))

    ns = "tenant-b"
    put(keys.encode_entity(ns, Entity("key-9", "Tenant B key", None, False, NOW_MS)))
    put(
        keys.config_item(
            keys.entity_config_key(ns, "key-9", keys.DEFAULT_RESOURCE),
            [Limit.per_minute("rpm", 5)],
            ns,
            NOW_MS,
            "entity_config",
            entity_id="key-9",
        )
    )
    put(old_bucket_item(ns, "key-9", "gpt-4", {"rpm": (0, 5, 5)}), bucket=True)
    put(old_usage_item(ns, "key-9", "gpt-4", "2027-01-15T09"))

    for i in range(extra_buckets):
        put(old_bucket_item("default", f"bulk-{i:03d}", "gpt-4", {"rpm": (1, 2, 2)}), bucket=True)
    return table


def scan_all(client: Any, name: str) -> dict[Key, dict[str, Any]]:
    """Every item of the table, by (PK, SK)."""
    items: dict[Key, dict[str, Any]] = {}
    params: dict[str, Any] = {"TableName": name, "ConsistentRead": True}
    while True:
        page = client.scan(**params)
        for item in page["Items"]:
            items[(item["PK"]["S"], item["SK"]["S"])] = item
        if not page.get("LastEvaluatedKey"):
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
