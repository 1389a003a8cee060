"""Audit events and the namespace index: keys, codecs, queries and transaction parts.

An audit event sits in its own partition per entity, `{ns}/AUDIT#{entity}` (namespace-level
changes, such as resource or system defaults, use `{ns}/AUDIT#` with nothing after it),
sorted by time: `#AUDIT#{ms, 13 digits}#{event id}`. GSI4 keys it by namespace too
(`{ns}` / `AUDIT#{ms}#{id}`), so a namespace's events come back in time order from one
index query. Table-level events (migrations, namespace deletions) use the reserved
namespace `_`, the one the schema version record lives in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from zae_limiter.keys.core import (
    A_CASCADE,
    A_CREATED,
    A_ENTITY_ID,
    A_KIND,
    A_PARENT,
    A_RESOURCE,
    DEFAULT_RESOURCE,
    GSI4,
    GSI4PK,
    GSI4SK,
    PK,
    SK,
    SK_CONFIG,
    TTL,
    Item,
    get_s,
    n,
    s,
)
from zae_limiter.keys.usage import STREAM_REMOVE
from zae_limiter.models import AuditEvent

A_ACTION = "action"
A_PRINCIPAL = "principal"
A_AT = "at"
A_EVENT_ID = "event_id"
A_NAMESPACE = "namespace"
A_BEFORE = "before"
A_AFTER = "after"
AUDIT_KIND = "audit"
AUDIT_SK_PREFIX = "#AUDIT#"
AUDIT_INDEX_PREFIX = "AUDIT#"
#: The namespace of table-level events; `validate_namespace` refuses it for users.
TABLE_NAMESPACE = "_"
_TS_DIGITS = 13
_DAY_SECONDS = 86_400


def audit_pk(ns: str, entity_id: str | None) -> str:
    return f"{ns}/AUDIT#{entity_id or ''}"


def audit_sk(at_ms: int, event_id: str) -> str:
    return f"{AUDIT_SK_PREFIX}{at_ms:0{_TS_DIGITS}d}#{event_id}"


def _index_sk(at_ms: int, event_id: str) -> str:
    return f"{AUDIT_INDEX_PREFIX}{at_ms:0{_TS_DIGITS}d}#{event_id}"


def audit_item(event: AuditEvent, retention_days: int | None) -> Item:
    """The event as an item; it expires `retention_days` after it happened (None: never)."""
    item: Item = {
        PK: s(audit_pk(event.namespace, event.entity_id)),
        SK: s(audit_sk(event.at_ms, event.event_id)),
        A_KIND: s(AUDIT_KIND),
        A_EVENT_ID: s(event.event_id),
        A_AT: n(event.at_ms),
        A_PRINCIPAL: s(event.principal),
        A_ACTION: s(event.action),
        A_NAMESPACE: s(event.namespace),
        GSI4PK: s(event.namespace),
        GSI4SK: s(_index_sk(event.at_ms, event.event_id)),
    }
    if event.entity_id is not None:
        item[A_ENTITY_ID] = s(event.entity_id)
    if event.resource is not None:
        item[A_RESOURCE] = s(event.resource)
    if event.before is not None:
        item[A_BEFORE] = s(json.dumps(event.before, sort_keys=True))
    if event.after is not None:
        item[A_AFTER] = s(json.dumps(event.after, sort_keys=True))
    if retention_days is not None:
        item[TTL] = n(event.at_ms // 1000 + retention_days * _DAY_SECONDS)
    return item


def decode_audit(item: Mapping[str, Any]) -> AuditEvent:
    before, after = get_s(item, A_BEFORE), get_s(item, A_AFTER)
    return AuditEvent(
        event_id=get_s(item, A_EVENT_ID) or "",
        at_ms=int(item[A_AT]["N"]),
        principal=get_s(item, A_PRINCIPAL) or "",
        action=get_s(item, A_ACTION) or "",
        namespace=get_s(item, A_NAMESPACE) or "",
        entity_id=get_s(item, A_ENTITY_ID),
        resource=get_s(item, A_RESOURCE),
        before=None if before is None else json.loads(before),
        after=None if after is None else json.loads(after),
    )


#: How a stream record says DynamoDB's TTL process deleted the item (not a caller).
STREAM_USER_IDENTITY = "userIdentity"
TTL_DELETER_TYPE = "Service"
TTL_DELETER = "dynamodb.amazonaws.com"


def expired_audit_image(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The old image of an audit event the table's TTL removed; None for any other record
    (a user's delete of an audit item, e.g. with its namespace, is not an expiry)."""
    if record.get("eventName") != STREAM_REMOVE:
        return None
    who = record.get(STREAM_USER_IDENTITY)
    if not isinstance(who, Mapping):
        return None
    if who.get("type") != TTL_DELETER_TYPE or who.get("principalId") != TTL_DELETER:
        return None
    body = record.get("dynamodb")
    old = body.get("OldImage") if isinstance(body, Mapping) else None
    if not isinstance(old, Mapping) or get_s(old, A_KIND) != AUDIT_KIND:
        return None
    return old


def audit_query_entity(table: str, ns: str, entity_id: str | None, since_ms: int) -> dict[str, Any]:
    """One entity's events (None: the namespace-level ones), oldest first, from `since_ms`."""
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :lo AND :hi",
        "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
        "ExpressionAttributeValues": {
            ":pk": s(audit_pk(ns, entity_id)),
            ":lo": s(audit_sk(max(0, since_ms), "")),
            ":hi": s(AUDIT_SK_PREFIX + "~"),
        },
        "ConsistentRead": True,
    }


def audit_query_namespace(table: str, ns: str, since_ms: int) -> dict[str, Any]:
    """Keys of a namespace's events (GSI4, KEYS_ONLY), oldest first, from `since_ms`."""
    return {
        "TableName": table,
        "IndexName": GSI4,
        "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :lo AND :hi",
        "ExpressionAttributeNames": {"#pk": GSI4PK, "#sk": GSI4SK},
        "ExpressionAttributeValues": {
            ":pk": s(ns),
            ":lo": s(_index_sk(max(0, since_ms), "")),
            ":hi": s(AUDIT_INDEX_PREFIX + "~"),
        },
    }


# ---------------------------------------------------------------- transactions
def transact(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"TransactItems": list(items)}


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


#: The attributes whose values tell that a config item was rewritten since it was read.
CONFIG_VERSION_ATTRS = (A_CREATED,)


def cancelled_by_condition(response: Mapping[str, Any]) -> list[bool]:
    """For a cancelled transaction: which of its items failed their condition."""
    reasons = response.get("CancellationReasons") or []
    return [str(r.get("Code", "")) == "ConditionalCheckFailed" for r in reasons]


# ---------------------------------------------------------------- the namespace index
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


# ---------------------------------------------------------------- stored limit levels
def config_level(item: Mapping[str, Any]) -> tuple[str | None, str | None] | None:
    """(entity, resource) of a config item's key; None if the key is not a config's.

    An entity default comes back with the resource None, as `set_limits` takes it.
    """
    pk, sk = get_s(item, PK) or "", get_s(item, SK) or ""
    if sk.startswith(SK_CONFIG + "#") and "/ENTITY#" in pk:
        resource = sk[len(SK_CONFIG) + 1 :]
        return pk.partition("/ENTITY#")[2], None if resource == DEFAULT_RESOURCE else resource
    if sk != SK_CONFIG:
        return None
    if "/RESOURCE#" in pk:
        return None, pk.partition("/RESOURCE#")[2]
    if pk.endswith("/SYSTEM#"):
        return None, None
    return None


# ---------------------------------------------------------------- entity updates
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
