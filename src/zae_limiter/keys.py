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
from zae_limiter.limits import RESERVED_LIMIT_NAMES, Limit
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
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def validate_namespace(namespace: str | None) -> str:
    if namespace is None:
        return DEFAULT_NAMESPACE
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace) or namespace == "_":
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
        A_WCU_LIMIT: n(bucket.partition_wcu),
        A_WINDOW_START: n(bucket.last_refill_ms),
        A_WINDOW_WRITES: n(1),
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
        if field in FIELDS and name and name not in RESERVED_LIMIT_NAMES:
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
        partition_wcu=partition_wcu(item),
        window_start_ms=get_n(item, A_WINDOW_START, -1),
        window_writes=get_n(item, A_WINDOW_WRITES),
    )


@lru_cache(maxsize=1024)
def _consume_expression(
    consumed: tuple[str, ...], checked: tuple[str, ...], reset_window: bool
) -> tuple[str, str]:
    sets, adds, _values = window_parts(reset_window, 0)
    for i, name in enumerate(consumed):
        adds.append(f"{limit_attr(name, 'tk')} :m{i}")
        adds.append(f"{limit_attr(name, 'tc')} :p{i}")
    conds = []
    for i, name in enumerate(checked):
        conds.append(f"{limit_attr(name, 'tk')} >= :c{i}")
        conds.append(f"{limit_attr(name, 'cp')} = :cp{i}")
        conds.append(f"{limit_attr(name, 'ra')} = :ra{i}")
        conds.append(f"{limit_attr(name, 'rp')} = :rp{i}")
    update = ("SET " + ", ".join(sets) + " " if sets else "") + "ADD " + ", ".join(adds)
    return update, " AND ".join(conds)


def speculative_consume(
    table: str,
    bucket_item_key: Item,
    consume_milli: Mapping[str, int],
    configs: Mapping[str, LimitState],
    *,
    now_ms: int = 0,
    reset_window: bool = False,
) -> dict[str, Any]:
    """One conditional UpdateItem that takes tokens without reading the bucket first.

    Every limit in `configs` must hold at least its `consume_milli` (0 when not consumed,
    so debt blocks) and carry exactly that stored config: a missing limit or a changed
    config fails the condition, and the caller reads ALL_OLD to decide what to do.
    """
    consumed = tuple(name for name, amount in consume_milli.items() if amount)
    checked = tuple(configs)
    update, condition = _consume_expression(consumed, checked, reset_window)
    values: Item = window_parts(reset_window, now_ms)[2]
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
    reset_window: bool = True,
    shard_count: int | None = None,
    fenced: bool = True,
) -> dict[str, Any]:
    """The slow path's write: refill and consume, fenced on `rf`.

    Existing limits change by ADD, so speculative writes that land between our read and
    this write (they never touch `rf`) still count; `floor_milli` fails the write rather
    than let such a write drive a consumed limit below zero. Limits new to the item are
    SET whole (`new_limits`), and every limit's stored config is brought up to date.
    """
    sets, adds, values = window_parts(reset_window, new_refill_ms)
    names: dict[str, str] = {}
    conds: list[str] = []
    if fenced:
        # Only a write that moves `rf` (or SETs whole values) must not race another one.
        sets.append("#rf = :rf")
        names["#rf"] = A_REFILL
        conds.append("#rf = :old_rf")
        values.update({":rf": n(new_refill_ms), ":old_rf": n(old_refill_ms)})
    if shard_count is not None:
        sets.append("#sc = :sc")
        names["#sc"] = A_SHARD_COUNT
        values[":sc"] = n(shard_count)
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
    for i, (name, cfg) in enumerate(configs.items() if fenced else ()):
        for field, value in (
            ("cp", cfg.capacity_milli),
            ("ra", cfg.refill_amount_milli),
            ("rp", cfg.refill_period_ms),
        ):
            sets.append(f"{limit_attr(name, field)} = :{field}{i}")
            values[f":{field}{i}"] = n(value)
    update = " ".join(
        part
        for part in (
            "SET " + ", ".join(sets) if sets else "",
            "ADD " + ", ".join(adds) if adds else "",
        )
        if part
    )
    conds.append("attribute_exists(#pk)")
    names["#pk"] = PK
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": update,
        "ConditionExpression": " AND ".join(conds),
        "ExpressionAttributeNames": names,
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
    # Every write to the partition counts in its write-rate window, adjustments included.
    adds = [f"{A_WINDOW_WRITES} :one"]
    values: Item = {":one": n(1)}
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


# ---------------------------------------------------------------- partition write pressure
#: Partition write limit (writes per second) of a bucket item; not an application limit.
A_WCU_LIMIT = "b_wcu_cp"
#: When shard 0 last doubled `shard_count` (ms); doublings are spaced so each can take effect.
A_SHARD_DOUBLED = "sd"
#: Write-rate window of the partition: start (ms) and writes counted since then. Every
#: hot-path write ADDs 1 to `wn`, or restarts the window (SET both) once it is 2 s old,
#: so the item never grows and the rate is measured in-band at no extra request.
A_WINDOW_START = "ws"
A_WINDOW_WRITES = "wn"
WINDOW_MS = 2000


def write_rate(item: Mapping[str, Any], now_ms: int) -> float:
    """Writes per second this partition took in its current window (0 when unknown)."""
    start = get_n(item, A_WINDOW_START, -1)
    writes = get_n(item, A_WINDOW_WRITES)
    if start < 0 or writes <= 0:
        return 0.0
    # Early in a window the count covers less than a second; dividing by at least one
    # second can only underestimate, so it never triggers a doubling by itself.
    return writes * 1000 / max(1000, now_ms - start)


def partition_wcu(item: Mapping[str, Any], default: int = 1000) -> int:
    return get_n(item, A_WCU_LIMIT, default) or default


def window_parts(reset: bool, now_ms: int) -> tuple[list[str], list[str], Item]:
    """(SET parts, ADD parts, values) that count one write in the item's window."""
    if reset:
        return (
            [f"{A_WINDOW_START} = :ws", f"{A_WINDOW_WRITES} = :one"],
            [],
            {
                ":ws": n(now_ms),
                ":one": n(1),
            },
        )
    return [], [f"{A_WINDOW_WRITES} :one"], {":one": n(1)}


def double_shards(
    table: str, shard0_key: Item, old_count: int, new_count: int, now_ms: int, measured_since: int
) -> dict[str, Any]:
    """Raise `shard_count` on shard 0 and restart its write-rate window.

    Refused when someone already changed the count, or when the rate that prompted it was
    measured (partly) before the last doubling: each doubling must be judged on traffic
    spread over the count it produced, or a burst would double again and again.
    """
    return {
        "TableName": table,
        "Key": shard0_key,
        "UpdateExpression": "SET #sc = :new, #sd = :now, #ws = :now, #wn = :zero",
        "ConditionExpression": "#sc = :old AND (attribute_not_exists(#sd) OR #sd <= :since)",
        "ExpressionAttributeNames": {
            "#sc": A_SHARD_COUNT,
            "#sd": A_SHARD_DOUBLED,
            "#ws": A_WINDOW_START,
            "#wn": A_WINDOW_WRITES,
        },
        "ExpressionAttributeValues": {
            ":new": n(new_count),
            ":old": n(old_count),
            ":now": n(now_ms),
            ":since": n(measured_since),
            ":zero": n(0),
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def with_doubling(
    params: Mapping[str, Any], old_count: int, new_count: int, now_ms: int, measured_since: int
) -> dict[str, Any]:
    """An acquire's UpdateItem on shard 0 that also doubles `shard_count` (same fences as
    `double_shards`). When shard 0 is throttled, a separate doubling write rarely gets in:
    riding on a write the client sends anyway, the first one to get in doubles."""
    update = str(params["UpdateExpression"])
    sets = "#sc = :dbl_new, #sd = :dbl_now"
    update = f"SET {sets}, {update[4:]}" if update.startswith("SET ") else f"SET {sets} {update}"
    condition = (
        f"({params['ConditionExpression']}) AND #sc = :dbl_old"
        " AND (attribute_not_exists(#sd) OR #sd <= :dbl_since)"
    )
    return {
        **params,
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {
            **params.get("ExpressionAttributeNames", {}),
            "#sc": A_SHARD_COUNT,
            "#sd": A_SHARD_DOUBLED,
        },
        "ExpressionAttributeValues": {
            **params["ExpressionAttributeValues"],
            ":dbl_new": n(new_count),
            ":dbl_old": n(old_count),
            ":dbl_now": n(now_ms),
            ":dbl_since": n(measured_since),
        },
    }


def move_tokens(
    table: str, bucket_item_key: Item, tokens_milli: Mapping[str, int]
) -> dict[str, Any]:
    """ADD tokens to a bucket without counting them as consumption (shard splits)."""
    adds = [f"{limit_attr(name, 'tk')} :v{i}" for i, name in enumerate(tokens_milli)]
    values = {f":v{i}": n(v) for i, v in enumerate(tokens_milli.values())}
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": "ADD " + ", ".join(adds),
        "ConditionExpression": "attribute_exists(#pk)",
        "ExpressionAttributeNames": {"#pk": PK},
        "ExpressionAttributeValues": values,
    }


# ================================================================ schema version and migrations
# Appended for issue 7 (`zae-limiter migrate`). The version record lives at `version_key()`;
# the schema-1 (pre-shard) bucket layout is spelled here only so the migration can retire it.
A_SCHEMA_VERSION = "schema_version"
A_MIN_CLIENT_VERSION = "min_client_version"
A_UPDATED_AT = "updated_at"
A_UPDATED_BY = "updated_by"
#: Migration progress, present only while a step is under way (or was interrupted).
A_MIGRATING_TO = "migrating_to"
A_MIGRATION_STEP = "migration_step"
A_MIGRATION_CURSOR = "migration_cursor"
A_MIGRATION_DONE = "migration_done"
A_MIGRATION_STARTED = "migration_started_at"
#: SK prefix of a schema-1 bucket item: PK `{ns}/ENTITY#{id}`, SK `#BUCKET#{resource}`.
OLD_BUCKET_SK_PREFIX = "#BUCKET#"

_VERSION_NAMES = {
    "#pk": PK,
    "#v": A_SCHEMA_VERSION,
    "#mcv": A_MIN_CLIENT_VERSION,
    "#at": A_UPDATED_AT,
    "#by": A_UPDATED_BY,
    "#to": A_MIGRATING_TO,
    "#step": A_MIGRATION_STEP,
    "#cur": A_MIGRATION_CURSOR,
    "#done": A_MIGRATION_DONE,
    "#started": A_MIGRATION_STARTED,
}


def _names(*placeholders: str) -> dict[str, str]:
    return {p: _VERSION_NAMES[p] for p in placeholders}


def old_bucket_sk(resource: str) -> str:
    return f"{OLD_BUCKET_SK_PREFIX}{resource}"


def namespace_of(pk: str) -> str:
    """The namespace a key belongs to: what precedes the first '/'."""
    return pk.partition("/")[0]


def get_version(table: str) -> dict[str, Any]:
    return {"TableName": table, "Key": version_key(), "ConsistentRead": True}


def set_version(
    table: str, version: int, min_client_version: str, now_ms: int, updated_by: str
) -> dict[str, Any]:
    """State the schema version, and clear any migration progress."""
    return {
        "TableName": table,
        "Key": version_key(),
        "UpdateExpression": "SET #v = :v, #mcv = :mcv, #at = :at, #by = :by "
        "REMOVE #to, #step, #cur, #done, #started",
        "ExpressionAttributeNames": _names(
            "#v", "#mcv", "#at", "#by", "#to", "#step", "#cur", "#done", "#started"
        ),
        "ExpressionAttributeValues": {
            ":v": n(version),
            ":mcv": s(min_client_version),
            ":at": n(now_ms),
            ":by": s(updated_by),
        },
        "ReturnValues": "ALL_NEW",
    }


def begin_migration(table: str, from_version: int, to_version: int, now_ms: int) -> dict[str, Any]:
    """Mark a step under way; keeps the progress of an interrupted run of the same step.

    Fails its condition when the table already is at `to_version` or beyond.
    """
    return {
        "TableName": table,
        "Key": version_key(),
        "UpdateExpression": "SET #v = if_not_exists(#v, :from), #to = :to, "
        "#started = if_not_exists(#started, :now)",
        "ConditionExpression": "attribute_not_exists(#v) OR #v < :to",
        "ExpressionAttributeNames": _names("#v", "#to", "#started"),
        "ExpressionAttributeValues": {
            ":from": n(from_version),
            ":to": n(to_version),
            ":now": n(now_ms),
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def save_migration_progress(
    table: str, to_version: int, step: str, cursor: str | None, done: int
) -> dict[str, Any]:
    """Where a step stands: its phase, the scan cursor (None: phase finished), items done."""
    update = "SET #step = :step, #done = :done"
    names = _names("#to", "#step", "#done", "#cur")
    values: Item = {":to": n(to_version), ":step": s(step), ":done": n(done)}
    if cursor is None:
        update += " REMOVE #cur"
    else:
        update += ", #cur = :cur"
        values[":cur"] = s(cursor)
    return {
        "TableName": table,
        "Key": version_key(),
        "UpdateExpression": update,
        "ConditionExpression": "#to = :to",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def old_bucket_scan(
    table: str, expire_at_s: int, start_key: Item | None, page_size: int
) -> dict[str, Any]:
    """One page of schema-1 bucket items (every namespace) that do not yet expire by then."""
    params: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "begins_with(#sk, :prefix) AND "
        "(attribute_not_exists(#ttl) OR #ttl > :ttl)",
        "ProjectionExpression": "#pk, #sk",
        "ExpressionAttributeNames": {"#pk": PK, "#sk": SK, "#ttl": TTL},
        "ExpressionAttributeValues": {":prefix": s(OLD_BUCKET_SK_PREFIX), ":ttl": n(expire_at_s)},
        "Limit": page_size,
    }
    if start_key:
        params["ExclusiveStartKey"] = start_key
    return params


def expire_old_bucket(table: str, item_key: Item, expire_at_s: int) -> dict[str, Any]:
    """Give an existing schema-1 bucket item a TTL, unless it already expires sooner."""
    return {
        "TableName": table,
        "Key": item_key,
        "UpdateExpression": "SET #ttl = :ttl",
        "ConditionExpression": "attribute_exists(#pk) AND begins_with(#sk, :prefix) AND "
        "(attribute_not_exists(#ttl) OR #ttl > :ttl)",
        "ExpressionAttributeNames": {"#pk": PK, "#sk": SK, "#ttl": TTL},
        "ExpressionAttributeValues": {":ttl": n(expire_at_s), ":prefix": s(OLD_BUCKET_SK_PREFIX)},
    }


# ================================================================ end of schema version section


# ======================================================== usage snapshots and the aggregator
# Appended for issue 6 (the aggregator). Usage snapshots live under the entity partition:
# PK `{ns}/ENTITY#{id}`, SK `#USAGE#{resource}#{window}#{start}`. Counters are exact
# millitokens (`u_{limit}`); `sq_{shard}` is the last stream sequence number of that
# bucket shard already counted, so a re-delivered stream record is never counted twice.
from zae_limiter.models import UsageSnapshot  # noqa: E402

KIND_USAGE = "usage"
SK_USAGE_PREFIX = "#USAGE#"
USAGE_INDEX_PREFIX = "USAGE#"
A_USAGE_WINDOW = "window"
A_USAGE_WINDOW_START = "window_start"
A_USAGE_EVENTS = "total_events"
USAGE_COUNTER_PREFIX = "u_"
USAGE_FENCE_PREFIX = "sq_"
#: On shard 0: since when (ms) the aggregator has seen the entity's traffic stay low.
A_QUIET_SINCE = "qs"
STREAM_INSERT, STREAM_MODIFY, STREAM_REMOVE = "INSERT", "MODIFY", "REMOVE"
TC_SUFFIX = "_tc"


def usage_counter_attr(limit_name: str) -> str:
    return f"{USAGE_COUNTER_PREFIX}{limit_name}"


def usage_fence_attr(shard_id: int) -> str:
    return f"{USAGE_FENCE_PREFIX}{shard_id}"


def usage_key(ns: str, entity_id: str, resource: str, window: str, window_start: str) -> Item:
    return key(entity_pk(ns, entity_id), usage_sk(resource, window, window_start))


def usage_sk_prefix(resource: str | None = None, window: str | None = None) -> str:
    if resource is None:
        return SK_USAGE_PREFIX
    if window is None:
        return f"{SK_USAGE_PREFIX}{resource}#"
    return f"{SK_USAGE_PREFIX}{resource}#{window}#"


_USAGE_NAMES = {"#e": A_ENTITY_ID, "#r": A_RESOURCE, "#w": A_USAGE_WINDOW,
                "#ws": A_USAGE_WINDOW_START, "#k": A_KIND, "#g2p": GSI2PK, "#g2s": GSI2SK,
                "#g4p": GSI4PK, "#g4s": GSI4SK, "#ttl": TTL, "#ev": A_USAGE_EVENTS}  # fmt: skip


@lru_cache(maxsize=256)
def _usage_expression(fences: int, counters: int) -> tuple[str, str | None]:
    sets = "SET #e = :e, #r = :r, #w = :w, #ws = :ws, #k = :k, #g2p = :g2p, #g2s = :g2s, "
    sets += "#g4p = :g4p, #g4s = :g4s, #ttl = :ttl"
    sets += "".join(f", #q{i} = :ql{i}" for i in range(fences))
    adds = " ADD #ev :ev" + "".join(f", #u{i} :u{i}" for i in range(counters))
    conds = " AND ".join(f"(attribute_not_exists(#q{i}) OR #q{i} < :qf{i})" for i in range(fences))
    return sets + adds, conds or None


def usage_update(
    table: str,
    ns: str,
    snapshot: UsageSnapshot,
    fences: Mapping[int, tuple[int, int]],
    expires_at_s: int,
) -> dict[str, Any]:
    """ADD a batch's consumption (`snapshot.counters` in millitokens) to a usage snapshot.

    `fences` maps each contributing bucket shard to (first, last) sequence numbers of the
    records counted: the write fails (ALL_OLD) if any of them was counted before.
    """
    e, r, w, ws = snapshot.entity_id, snapshot.resource, snapshot.window, snapshot.window_start
    names = dict(_USAGE_NAMES)
    values: Item = {":e": {"S": e}, ":r": {"S": r}, ":w": {"S": w}, ":ws": {"S": ws},
                    ":k": {"S": KIND_USAGE}, ":g2p": {"S": resource_pk(ns, r)},
                    ":g2s": {"S": f"{USAGE_INDEX_PREFIX}{w}#{ws}#{e}"}, ":g4p": {"S": ns},
                    ":g4s": {"S": f"{USAGE_INDEX_PREFIX}{e}#{r}#{w}#{ws}"},
                    ":ttl": {"N": str(expires_at_s)},
                    ":ev": {"N": str(snapshot.total_events)}}  # fmt: skip
    ordered = sorted(fences.items()) if len(fences) > 1 else fences.items()
    for i, (shard, (first, last)) in enumerate(ordered):
        names[f"#q{i}"] = f"{USAGE_FENCE_PREFIX}{shard}"
        values[f":qf{i}"], values[f":ql{i}"] = {"N": str(first)}, {"N": str(last)}
    for i, (limit_name, milli) in enumerate(sorted(snapshot.counters.items())):
        names[f"#u{i}"] = f"{USAGE_COUNTER_PREFIX}{limit_name}"
        values[f":u{i}"] = {"N": str(milli)}
    update, condition = _usage_expression(len(fences), len(snapshot.counters))
    params: dict[str, Any] = {
        "TableName": table,
        "Key": {PK: {"S": entity_pk(ns, e)}, SK: {"S": usage_sk(r, w, ws)}},
        "UpdateExpression": update,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if condition:
        params["ConditionExpression"] = condition
    return params


def usage_fences(item: Mapping[str, Any]) -> dict[int, int]:
    """{shard_id: last sequence number counted} of a usage snapshot item."""
    out: dict[int, int] = {}
    for attr, value in item.items():
        suffix = attr[len(USAGE_FENCE_PREFIX) :]
        if attr.startswith(USAGE_FENCE_PREFIX) and suffix.isdigit():
            out[int(suffix)] = int(value["N"])
    return out


def decode_usage(item: Mapping[str, Any]) -> UsageSnapshot:
    """A usage snapshot item; counters in whole tokens (the library consumes whole tokens)."""
    _ns, entity_id = parse_entity_pk(item[PK]["S"])
    resource, window, window_start = parse_usage_sk(item[SK]["S"])
    counters = {
        attr[len(USAGE_COUNTER_PREFIX) :]: int(value["N"]) // 1000
        for attr, value in item.items()
        if attr.startswith(USAGE_COUNTER_PREFIX) and "N" in value
    }
    return UsageSnapshot(
        entity_id=entity_id,
        resource=resource,
        window=window,
        window_start=window_start,
        counters=dict(sorted(counters.items())),
        total_events=get_n(item, A_USAGE_EVENTS),
    )


def usage_query_entity(
    table: str, ns: str, entity_id: str, resource: str | None, window: str | None
) -> dict[str, Any]:
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
        "ExpressionAttributeValues": {
            ":pk": s(entity_pk(ns, entity_id)),
            ":prefix": s(usage_sk_prefix(resource, window)),
        },
    }


def usage_query_resource(table: str, ns: str, resource: str, window: str | None) -> dict[str, Any]:
    """Usage snapshot keys of a resource (GSI2 is KEYS_ONLY: BatchGetItem the items)."""
    prefix = USAGE_INDEX_PREFIX if window is None else f"{USAGE_INDEX_PREFIX}{window}#"
    return {
        "TableName": table,
        "IndexName": GSI2,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#pk": GSI2PK, "#sk": GSI2SK},
        "ExpressionAttributeValues": {":pk": s(resource_pk(ns, resource)), ":prefix": s(prefix)},
    }


def usage_query_namespace(table: str, ns: str) -> dict[str, Any]:
    """Usage snapshot keys of a namespace (GSI4, KEYS_ONLY)."""
    return {
        "TableName": table,
        "IndexName": GSI4,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#pk": GSI4PK, "#sk": GSI4SK},
        "ExpressionAttributeValues": {":pk": s(ns), ":prefix": s(USAGE_INDEX_PREFIX)},
    }


def batch_get_consistent(table: str, item_keys: list[Item]) -> dict[str, Any]:
    return {"RequestItems": {table: {"Keys": item_keys, "ConsistentRead": True}}}


def aggregator_refill(
    table: str,
    bucket_item_key: Item,
    old_refill_ms: int,
    new_refill_ms: int,
    add_milli: Mapping[str, int],
    ceiling_milli: Mapping[str, int],
) -> dict[str, Any]:
    """The aggregator's proactive refill: SET rf, ADD the refilled tokens.

    Fenced on `rf` (a client's refill or another aggregator's wins), and on each limit
    still holding at most the tokens the refill was computed from, so concurrent
    speculative ADDs commute and no limit is pushed over its capacity.
    """
    names = {"#rf": A_REFILL}
    values: Item = {":rf": n(new_refill_ms), ":old_rf": n(old_refill_ms)}
    adds, conds = [], ["#rf = :old_rf"]
    for i, (name, milli) in enumerate(sorted(add_milli.items())):
        names[f"#t{i}"] = limit_attr(name, "tk")
        values[f":a{i}"], values[f":c{i}"] = n(milli), n(ceiling_milli[name])
        adds.append(f"#t{i} :a{i}")
        conds.append(f"#t{i} <= :c{i}")
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": "SET #rf = :rf ADD " + ", ".join(adds),
        "ConditionExpression": " AND ".join(conds),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def propagate_shard_count(table: str, bucket_item_key: Item, new_count: int) -> dict[str, Any]:
    """Raise an existing shard's `shard_count` to shard 0's (never lowers it)."""
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": "SET #sc = :new",
        "ConditionExpression": "attribute_exists(#pk) AND #sc < :new",
        "ExpressionAttributeNames": {"#pk": PK, "#sc": A_SHARD_COUNT},
        "ExpressionAttributeValues": {":new": n(new_count)},
    }


def mark_quiet(table: str, shard0_key: Item, shard_count: int, now_ms: int) -> dict[str, Any]:
    """Record on shard 0 that the entity's traffic went low (first time seen)."""
    return {
        "TableName": table,
        "Key": shard0_key,
        "UpdateExpression": "SET #qs = :now",
        "ConditionExpression": "attribute_exists(#pk) AND attribute_not_exists(#qs) AND #sc = :sc",
        "ExpressionAttributeNames": {"#pk": PK, "#qs": A_QUIET_SINCE, "#sc": A_SHARD_COUNT},
        "ExpressionAttributeValues": {":now": n(now_ms), ":sc": n(shard_count)},
    }


def clear_quiet(table: str, shard0_key: Item) -> dict[str, Any]:
    return {
        "TableName": table,
        "Key": shard0_key,
        "UpdateExpression": "REMOVE #qs",
        "ConditionExpression": "attribute_exists(#qs)",
        "ExpressionAttributeNames": {"#qs": A_QUIET_SINCE},
    }


def merge_update(
    table: str,
    bucket_item_key: Item,
    *,
    old_count: int,
    new_count: int,
    old_refill_ms: int,
    new_refill_ms: int,
    add_milli: Mapping[str, int],
    expect_milli: Mapping[str, int],
    exact: bool,
    shard0_now_ms: int | None = None,
) -> dict[str, Any]:
    """One shard's part of a merge transaction (a TransactWriteItems `Update`).

    A drained shard (`exact=True`) must hold exactly `expect_milli`; a receiving shard at
    most that (speculative ADDs may have taken some since it was read). Both are fenced
    on `rf` and on `shard_count = old_count`, and both SET the halved count. On shard 0
    (`shard0_now_ms`) the change time `sd` is set and the quiet mark cleared.
    """
    names = {"#pk": PK, "#rf": A_REFILL, "#sc": A_SHARD_COUNT}
    values: Item = {":old": n(old_count), ":new": n(new_count), ":orf": n(old_refill_ms),
                    ":rf": n(new_refill_ms)}  # fmt: skip
    sets, adds = ["#sc = :new", "#rf = :rf"], []
    conds = ["attribute_exists(#pk)", "#sc = :old", "#rf = :orf"]
    for i, (name, expect) in enumerate(sorted(expect_milli.items())):
        names[f"#t{i}"] = limit_attr(name, "tk")
        values[f":x{i}"] = n(expect)
        conds.append(f"#t{i} {'=' if exact else '<='} :x{i}")
        if add_milli.get(name):
            values[f":a{i}"] = n(add_milli[name])
            adds.append(f"#t{i} :a{i}")
    update = "SET " + ", ".join(sets)
    if shard0_now_ms is not None:
        names.update({"#sd": A_SHARD_DOUBLED, "#qs": A_QUIET_SINCE})
        values[":sd"] = n(shard0_now_ms)
        update += ", #sd = :sd"
    if adds:
        update += " ADD " + ", ".join(adds)
    if shard0_now_ms is not None:
        update += " REMOVE #qs"
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": update,
        "ConditionExpression": " AND ".join(conds),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def merge_transaction(updates: list[dict[str, Any]]) -> dict[str, Any]:
    return {"TransactItems": [{"Update": u} for u in updates]}


def table_from_stream_arn(arn: str) -> str | None:
    """`arn:aws:dynamodb:{region}:{account}:table/{name}/stream/{label}` -> name."""
    _, sep, rest = arn.partition(":table/")
    return rest.split("/", 1)[0] or None if sep else None


# ======================================================== end of usage / aggregator section


# ======================================================== failure policy (issue 10)
#: On the system config item: what acquire does when DynamoDB is unavailable.
A_ON_UNAVAILABLE = "on_unavailable"
# ======================================================== end of failure policy section
