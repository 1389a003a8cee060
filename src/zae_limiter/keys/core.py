"""Attribute names, key formats and value helpers: the vocabulary every other part uses."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from zae_limiter.errors import ValidationError

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
#: Stored per limit: full-at time, capacity, refill amount and period, total consumed;
#: `tk` only on schema-v2 items not converted yet.
FIELDS = ("fa", "cp", "ra", "rp", "tc", "tk", "sf")

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
    if value in _VALID_IDS:
        return value
    if "#" in value:
        raise ValidationError(f"{kind} {value!r} contains '#', which is reserved for keys")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in value):
        raise ValidationError(f"{kind} {value!r} contains a control character")
    if value != value.strip():
        raise ValidationError(f"{kind} {value!r} has leading or trailing whitespace")
    if len(_VALID_IDS) >= _VALID_IDS_MAX:
        _VALID_IDS.clear()
    _VALID_IDS.add(value)
    return value


#: Ids that passed the checks above: a hot acquire on a known key skips the per-character
#: scan. Bounded, and cleared whole when full (a set add/lookup is atomic under the GIL).
_VALID_IDS: set[str] = set()
_VALID_IDS_MAX = 65_536


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


#: `bucket_pk(ns, entity_id, resource, shard_id)`: `{ns}/BUCKET#{id}#{resource}#{shard}`.
#: A bound `str.format`, not a def: every acquire builds a bucket key, and this costs it
#: no Python frame.
bucket_pk: Callable[[str, str, str, int], str] = "{}/BUCKET#{}#{}#{}".format


def is_bucket_pk(pk: str) -> bool:
    """Whether a PK has the bucket-shard shape (it may still fail to parse)."""
    return "/BUCKET#" in pk


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
    # `key(...)` spelled out: built on every acquire.
    return {PK: {"S": bucket_pk(ns, entity_id, resource, shard_id)}, SK: {"S": SK_STATE}}


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


def item_key(item: Mapping[str, Any]) -> Item:
    """The key of an item read (its PK and SK, nothing else)."""
    return {PK: item[PK], SK: item[SK]}


def key_id(item: Mapping[str, Any]) -> tuple[str, str]:
    """An item's (or an item key's) PK and SK as plain strings: to index items read."""
    return str(item[PK]["S"]), str(item[SK]["S"])


def pk_of(item: Mapping[str, Any]) -> str:
    return str(item[PK]["S"])


# ---------------------------------------------------------------- requests
def get_consistent(table: str, item_key: Item) -> dict[str, Any]:
    """A GetItem that reads the latest write: what a read-then-conditional-write needs."""
    return {"TableName": table, "Key": item_key, "ConsistentRead": True}


__all__ = [
    "A_CASCADE",
    "A_CREATED",
    "A_ENTITY_ID",
    "A_KIND",
    "A_LIMITS",
    "A_NAME",
    "A_PARENT",
    "A_REFILL",
    "A_RESOURCE",
    "A_SHARD_COUNT",
    "A_SHARD_ID",
    "BUCKET_PREFIX",
    "DEFAULT_NAMESPACE",
    "DEFAULT_RESOURCE",
    "FIELDS",
    "GSI1",
    "GSI1PK",
    "GSI1SK",
    "GSI2",
    "GSI2PK",
    "GSI2SK",
    "GSI3",
    "GSI3PK",
    "GSI3SK",
    "GSI4",
    "GSI4PK",
    "GSI4SK",
    "MAX_ID_LENGTH",
    "PK",
    "SK",
    "SK_CONFIG",
    "SK_META",
    "SK_STATE",
    "TTL",
    "VERSION_PK",
    "VERSION_SK",
    "Item",
    "bucket_key",
    "bucket_pk",
    "config_sk",
    "entity_config_key",
    "entity_key",
    "entity_pk",
    "get_bool",
    "get_consistent",
    "get_n",
    "get_s",
    "is_bucket_pk",
    "item_key",
    "key",
    "key_id",
    "limit_attr",
    "n",
    "parent_pk",
    "parse_bucket_pk",
    "parse_entity_pk",
    "parse_usage_sk",
    "pk_of",
    "resource_config_key",
    "resource_pk",
    "s",
    "system_config_key",
    "system_pk",
    "usage_sk",
    "validate_id",
    "validate_namespace",
    "validate_resource",
    "version_key",
]
