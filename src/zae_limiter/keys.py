"""Every DynamoDB string of the library: keys, attribute names, expressions, codecs.

Nothing outside this module spells a key format, an attribute name or an expression.
Items are in DynamoDB's wire format (`{"S": ...}`, `{"N": ...}`), which boto3's and
aiobotocore's low-level clients share.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from zae_limiter.bucket import LimitState
from zae_limiter.errors import ValidationError
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState, Entity

Item = dict[str, Any]

# ---------------------------------------------------------------- attribute names
PK = "PK"
SK = "SK"
GSI1PK, GSI1SK = "GSI1PK", "GSI1SK"
GSI2PK, GSI2SK = "GSI2PK", "GSI2SK"
GSI3PK, GSI3SK = "GSI3PK", "GSI3SK"
GSI4PK, GSI4SK = "GSI4PK", "GSI4SK"
GSI1, GSI2, GSI3, GSI4 = "GSI1", "GSI2", "GSI3", "GSI4"
TTL = "ttl"

A_ENTITY_ID = "entity_id"
A_RESOURCE = "resource"
A_NAME = "display_name"
A_PARENT = "parent_id"
A_CASCADE = "cascade"
A_CREATED = "created_at"
A_SHARD_ID = "shard_id"
A_SHARD_COUNT = "shard_count"
A_REFILL = "rf"
A_LIMITS = "limits"
A_KIND = "kind"
BUCKET_PREFIX = "b_"
FIELDS = ("tk", "cp", "ra", "rp", "tc")

# ---------------------------------------------------------------- key formats
DEFAULT_NAMESPACE = "default"
#: The resource name under which an entity's limits for every resource are stored.
DEFAULT_RESOURCE = "_default_"
SK_META = "#META"
SK_CONFIG = "#CONFIG"
SK_STATE = "#STATE"
VERSION_PK = "_/SYSTEM#"
VERSION_SK = "#VERSION"
MAX_ID_LENGTH = 256
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def validate_namespace(namespace: str | None) -> str:
    if namespace is None:
        return DEFAULT_NAMESPACE
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace) or namespace == "_":
        raise ValidationError(
            f"invalid namespace {namespace!r}: use 1-64 letters, digits, '_', '.' or '-'"
        )
    return namespace


def validate_id(kind: str, value: object) -> str:
    """Entity ids and resource names: 1-256 characters, no '#', no control characters."""
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{kind} must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID_LENGTH:
        raise ValidationError(f"{kind} is {len(value)} characters long; the maximum is 256")
    if "#" in value:
        raise ValidationError(f"{kind} {value!r} contains '#', which is reserved for keys")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in value):
        raise ValidationError(f"{kind} {value!r} contains a control character")
    if value != value.strip():
        raise ValidationError(f"{kind} {value!r} has leading or trailing whitespace")
    return value


def validate_resource(resource: object) -> str:
    value = validate_id("resource", resource)
    if value == DEFAULT_RESOURCE:
        raise ValidationError(f"resource name {DEFAULT_RESOURCE!r} is reserved")
    return value


def entity_pk(ns: str, entity_id: str) -> str:
    return f"{ns}/ENTITY#{entity_id}"


def config_sk(resource: str) -> str:
    return f"{SK_CONFIG}#{resource}"


def resource_pk(ns: str, resource: str) -> str:
    return f"{ns}/RESOURCE#{resource}"


def system_pk(ns: str) -> str:
    return f"{ns}/SYSTEM#"


def parent_pk(ns: str, parent_id: str) -> str:
    return f"{ns}/PARENT#{parent_id}"


def bucket_pk(ns: str, entity_id: str, resource: str, shard_id: int) -> str:
    return f"{ns}/BUCKET#{entity_id}#{resource}#{shard_id}"


def parse_bucket_pk(pk: str) -> tuple[str, str, str, int]:
    """`{ns}/BUCKET#{entity}#{resource}#{shard}` -> (ns, entity, resource, shard)."""
    ns, sep, rest = pk.partition("/BUCKET#")
    parts = rest.split("#")
    if not sep or len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"not a bucket key: {pk!r}")
    return ns, parts[0], parts[1], int(parts[2])


def parse_entity_pk(pk: str) -> tuple[str, str]:
    ns, sep, entity_id = pk.partition("/ENTITY#")
    if not sep or not entity_id:
        raise ValueError(f"not an entity key: {pk!r}")
    return ns, entity_id


def usage_sk(resource: str, window: str, window_start: str) -> str:
    return f"#USAGE#{resource}#{window}#{window_start}"


def parse_usage_sk(sk: str) -> tuple[str, str, str]:
    parts = sk.split("#")
    if len(parts) != 5 or parts[1] != "USAGE":
        raise ValueError(f"not a usage key: {sk!r}")
    return parts[2], parts[3], parts[4]


def key(pk: str, sk: str) -> Item:
    return {PK: {"S": pk}, SK: {"S": sk}}


def bucket_key(ns: str, entity_id: str, resource: str, shard_id: int) -> Item:
    return key(bucket_pk(ns, entity_id, resource, shard_id), SK_STATE)


def entity_key(ns: str, entity_id: str) -> Item:
    return key(entity_pk(ns, entity_id), SK_META)


def entity_config_key(ns: str, entity_id: str, resource: str) -> Item:
    return key(entity_pk(ns, entity_id), config_sk(resource))


def resource_config_key(ns: str, resource: str) -> Item:
    return key(resource_pk(ns, resource), SK_CONFIG)


def system_config_key(ns: str) -> Item:
    return key(system_pk(ns), SK_CONFIG)


def version_key() -> Item:
    return key(VERSION_PK, VERSION_SK)


def limit_attr(name: str, field: str) -> str:
    return f"{BUCKET_PREFIX}{name}_{field}"


# ---------------------------------------------------------------- value helpers
def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def get_s(item: Mapping[str, Any], attr: str) -> str | None:
    value = item.get(attr)
    return None if value is None else str(value["S"])


def get_n(item: Mapping[str, Any], attr: str, default: int = 0) -> int:
    value = item.get(attr)
    return default if value is None else int(value["N"])


def get_bool(item: Mapping[str, Any], attr: str) -> bool:
    value = item.get(attr)
    return bool(value and value.get("BOOL"))


# ---------------------------------------------------------------- entities
def encode_entity(ns: str, entity: Entity) -> Item:
    item: Item = {
        **entity_key(ns, entity.entity_id),
        A_KIND: s("entity"),
        A_ENTITY_ID: s(entity.entity_id),
        A_CASCADE: {"BOOL": entity.cascade},
        GSI4PK: s(ns),
        GSI4SK: s(f"ENTITY#{entity.entity_id}"),
    }
    if entity.name is not None:
        item[A_NAME] = s(entity.name)
    if entity.created_at_ms is not None:
        item[A_CREATED] = n(entity.created_at_ms)
    if entity.parent_id is not None:
        item[A_PARENT] = s(entity.parent_id)
        item[GSI1PK] = s(parent_pk(ns, entity.parent_id))
        item[GSI1SK] = s(f"CHILD#{entity.entity_id}")
    return item


def decode_entity(item: Mapping[str, Any]) -> Entity:
    created = item.get(A_CREATED)
    return Entity(
        entity_id=get_s(item, A_ENTITY_ID) or "",
        name=get_s(item, A_NAME),
        parent_id=get_s(item, A_PARENT),
        cascade=get_bool(item, A_CASCADE),
        created_at_ms=None if created is None else int(created["N"]),
    )


def entity_query_children(table: str, ns: str, parent_id: str) -> dict[str, Any]:
    return {
        "TableName": table,
        "IndexName": GSI1,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": GSI1PK},
        "ExpressionAttributeValues": {":pk": s(parent_pk(ns, parent_id))},
    }


def entity_query_items(table: str, ns: str, entity_id: str) -> dict[str, Any]:
    """Every item under the entity's partition: meta, configs, usage snapshots."""
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": PK},
        "ExpressionAttributeValues": {":pk": s(entity_pk(ns, entity_id))},
        "ProjectionExpression": "#pk, SK",
    }


def namespace_query_entities(table: str, ns: str) -> dict[str, Any]:
    return {
        "TableName": table,
        "IndexName": GSI4,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#pk": GSI4PK, "#sk": GSI4SK},
        "ExpressionAttributeValues": {":pk": s(ns), ":prefix": s("ENTITY#")},
    }


def bucket_query_for_entity(
    table: str, ns: str, entity_id: str, resource: str | None = None
) -> dict[str, Any]:
    """Bucket keys of an entity (all resources, or one) through KEYS_ONLY GSI3."""
    prefix = "BUCKET#" if resource is None else f"BUCKET#{resource}#"
    return {
        "TableName": table,
        "IndexName": GSI3,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#pk": GSI3PK, "#sk": GSI3SK},
        "ExpressionAttributeValues": {
            ":pk": s(entity_pk(ns, entity_id)),
            ":prefix": s(prefix),
        },
    }


def put_new(table: str, item: Item) -> dict[str, Any]:
    return {
        "TableName": table,
        "Item": item,
        "ConditionExpression": "attribute_not_exists(#pk)",
        "ExpressionAttributeNames": {"#pk": PK},
    }


# ---------------------------------------------------------------- limit configs
def encode_limits(limits: Iterable[Limit]) -> dict[str, Any]:
    return {
        "M": {
            limit.name: {
                "M": {
                    "cp": n(limit.capacity),
                    "ra": n(limit.refill_amount),
                    "rp": n(limit.refill_period_seconds),
                }
            }
            for limit in limits
        }
    }


def decode_limits(item: Mapping[str, Any]) -> tuple[Limit, ...]:
    stored = item.get(A_LIMITS, {}).get("M", {})
    return tuple(
        Limit(
            name,
            int(v["M"]["cp"]["N"]),
            int(v["M"]["ra"]["N"]),
            int(v["M"]["rp"]["N"]),
        )
        for name, v in sorted(stored.items())
    )


def config_item(
    config_key: Item, limits: Iterable[Limit], ns: str, now_ms: int, kind: str, **extra: str
) -> Item:
    item: Item = {
        **config_key,
        A_KIND: s(kind),
        A_LIMITS: encode_limits(limits),
        A_CREATED: n(now_ms),
        GSI4PK: s(ns),
        GSI4SK: s(f"{kind.upper()}#{config_key[PK]['S']}#{config_key[SK]['S']}"),
    }
    for attr, value in extra.items():
        item[attr] = s(value)
    return item


# ---------------------------------------------------------------- buckets
def new_bucket_item(
    ns: str,
    bucket: BucketState,
) -> Item:
    """A bucket item as first written. Its index keys never change afterwards."""
    e, r, shard = bucket.entity_id, bucket.resource, bucket.shard_id
    item: Item = {
        **bucket_key(ns, e, r, shard),
        A_ENTITY_ID: s(e),
        A_RESOURCE: s(r),
        A_SHARD_ID: n(shard),
        A_SHARD_COUNT: n(bucket.shard_count),
        A_REFILL: n(bucket.last_refill_ms),
        A_CASCADE: {"BOOL": bucket.cascade},
        GSI2PK: s(resource_pk(ns, r)),
        GSI2SK: s(f"BUCKET#{e}#{shard}"),
        GSI3PK: s(entity_pk(ns, e)),
        GSI3SK: s(f"BUCKET#{r}#{shard}"),
        GSI4PK: s(ns),
        GSI4SK: s(f"BUCKET#{e}#{r}#{shard}"),
    }
    if bucket.parent_id is not None:
        item[A_PARENT] = s(bucket.parent_id)
    for name, state in bucket.limits.items():
        item[limit_attr(name, "tk")] = n(state.tokens_milli)
        item[limit_attr(name, "cp")] = n(state.capacity_milli)
        item[limit_attr(name, "ra")] = n(state.refill_amount_milli)
        item[limit_attr(name, "rp")] = n(state.refill_period_ms)
        item[limit_attr(name, "tc")] = n(state.total_consumed_milli)
    return item


def decode_bucket(item: Mapping[str, Any]) -> BucketState:
    fields: dict[str, dict[str, int]] = {}
    for attr, value in item.items():
        if not attr.startswith(BUCKET_PREFIX) or "N" not in value:
            continue
        name, _, field = attr[len(BUCKET_PREFIX) :].rpartition("_")
        if field in FIELDS and name:
            fields.setdefault(name, {})[field] = int(value["N"])
    limits = {
        name: LimitState(
            tokens_milli=f.get("tk", 0),
            capacity_milli=f["cp"],
            refill_amount_milli=f["ra"],
            refill_period_ms=f["rp"],
            total_consumed_milli=f.get("tc", 0),
        )
        for name, f in fields.items()
        if "cp" in f and "ra" in f and "rp" in f and f["rp"] > 0
    }
    return BucketState(
        entity_id=get_s(item, A_ENTITY_ID) or "",
        resource=get_s(item, A_RESOURCE) or "",
        shard_id=get_n(item, A_SHARD_ID),
        shard_count=max(1, get_n(item, A_SHARD_COUNT, 1)),
        last_refill_ms=get_n(item, A_REFILL),
        limits=limits,
        cascade=get_bool(item, A_CASCADE),
        parent_id=get_s(item, A_PARENT),
    )


@lru_cache(maxsize=1024)
def _consume_expression(consumed: tuple[str, ...], checked: tuple[str, ...]) -> tuple[str, str]:
    adds = []
    for i, name in enumerate(consumed):
        adds.append(f"{limit_attr(name, 'tk')} :m{i}")
        adds.append(f"{limit_attr(name, 'tc')} :p{i}")
    conds = []
    for i, name in enumerate(checked):
        conds.append(f"{limit_attr(name, 'tk')} >= :c{i}")
        conds.append(f"{limit_attr(name, 'cp')} = :cp{i}")
        conds.append(f"{limit_attr(name, 'ra')} = :ra{i}")
        conds.append(f"{limit_attr(name, 'rp')} = :rp{i}")
    return "ADD " + ", ".join(adds), " AND ".join(conds)


def speculative_consume(
    table: str,
    bucket_item_key: Item,
    consume_milli: Mapping[str, int],
    configs: Mapping[str, LimitState],
) -> dict[str, Any]:
    """One conditional UpdateItem that takes tokens without reading the bucket first.

    Every limit in `configs` must hold at least its `consume_milli` (0 when not consumed,
    so debt blocks) and carry exactly that stored config: a missing limit or a changed
    config fails the condition, and the caller reads ALL_OLD to decide what to do.
    """
    consumed = tuple(name for name, amount in consume_milli.items() if amount)
    checked = tuple(configs)
    update, condition = _consume_expression(consumed, checked)
    values: Item = {}
    for i, name in enumerate(consumed):
        values[f":m{i}"] = n(-consume_milli[name])
        values[f":p{i}"] = n(consume_milli[name])
    for i, name in enumerate(checked):
        cfg = configs[name]
        values[f":c{i}"] = n(consume_milli.get(name, 0))
        values[f":cp{i}"] = n(cfg.capacity_milli)
        values[f":ra{i}"] = n(cfg.refill_amount_milli)
        values[f":rp{i}"] = n(cfg.refill_period_ms)
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def refill_and_consume(
    table: str,
    bucket_item_key: Item,
    *,
    old_refill_ms: int,
    new_refill_ms: int,
    token_delta_milli: Mapping[str, int],
    consumed_milli: Mapping[str, int],
    floor_milli: Mapping[str, int],
    new_limits: Mapping[str, LimitState],
    configs: Mapping[str, LimitState],
) -> dict[str, Any]:
    """The slow path's write: refill and consume, fenced on `rf`.

    Existing limits change by ADD, so speculative writes that land between our read and
    this write (they never touch `rf`) still count; `floor_milli` fails the write rather
    than let such a write drive a consumed limit below zero. Limits new to the item are
    SET whole (`new_limits`), and every limit's stored config is brought up to date.
    """
    sets = ["#rf = :rf"]
    adds = []
    conds = ["#rf = :old_rf"]
    values: Item = {":rf": n(new_refill_ms), ":old_rf": n(old_refill_ms)}
    for i, (name, delta) in enumerate(token_delta_milli.items()):
        if delta:
            adds.append(f"{limit_attr(name, 'tk')} :d{i}")
            values[f":d{i}"] = n(delta)
        if consumed_milli.get(name):
            adds.append(f"{limit_attr(name, 'tc')} :t{i}")
            values[f":t{i}"] = n(consumed_milli[name])
        if name in floor_milli:
            conds.append(f"{limit_attr(name, 'tk')} >= :f{i}")
            values[f":f{i}"] = n(floor_milli[name])
    for i, (name, state) in enumerate(new_limits.items()):
        sets.append(f"{limit_attr(name, 'tk')} = :ntk{i}")
        sets.append(f"{limit_attr(name, 'tc')} = :ntc{i}")
        values[f":ntk{i}"] = n(state.tokens_milli)
        values[f":ntc{i}"] = n(state.total_consumed_milli)
    for i, (name, cfg) in enumerate(configs.items()):
        for field, value in (
            ("cp", cfg.capacity_milli),
            ("ra", cfg.refill_amount_milli),
            ("rp", cfg.refill_period_ms),
        ):
            sets.append(f"{limit_attr(name, field)} = :{field}{i}")
            values[f":{field}{i}"] = n(value)
    update = "SET " + ", ".join(sets)
    if adds:
        update += " ADD " + ", ".join(adds)
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": update,
        "ConditionExpression": " AND ".join(conds),
        "ExpressionAttributeNames": {"#rf": A_REFILL},
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def create_bucket(table: str, item: Item) -> dict[str, Any]:
    return {
        **put_new(table, item),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def adjust_tokens(
    table: str, bucket_item_key: Item, consumed_milli: Mapping[str, int]
) -> dict[str, Any]:
    """Unconditional ADD of a consumption delta (negative gives tokens back).

    It may drive tokens below zero: usage that already happened is recorded as debt.
    The item must still exist, so a deleted bucket is not resurrected half-written.
    """
    adds = []
    values: Item = {}
    for i, (name, delta) in enumerate(consumed_milli.items()):
        adds.append(f"{limit_attr(name, 'tk')} :m{i}, {limit_attr(name, 'tc')} :p{i}")
        values[f":m{i}"] = n(-delta)
        values[f":p{i}"] = n(delta)
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": "ADD " + ", ".join(adds),
        "ConditionExpression": "attribute_exists(#pk)",
        "ExpressionAttributeNames": {"#pk": PK},
        "ExpressionAttributeValues": values,
    }
