"""Audit events: keys, codec and queries.

An audit event sits in its own partition per entity, `{ns}/AUDIT#{entity}` (namespace-level
changes, such as resource or system defaults, use `{ns}/AUDIT#` with nothing after it),
sorted by time: `#AUDIT#{ms, 13 digits}#{event id}`. GSI4 keys it by namespace too
(`{ns}` / `AUDIT#{ms}#{id}`), so a namespace's events come back in time order from one
index query. Table-level events (migrations, namespace deletions) use the reserved
namespace `_`, the one the schema version record lives in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zae_limiter.keys.core import (
    A_ENTITY_ID,
    A_KIND,
    A_RESOURCE,
    GSI4,
    GSI4PK,
    GSI4SK,
    PK,
    SK,
    TTL,
    Item,
    get_s,
    n,
    s,
)
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


__all__ = [
    "AUDIT_INDEX_PREFIX",
    "AUDIT_KIND",
    "AUDIT_SK_PREFIX",
    "A_ACTION",
    "A_AFTER",
    "A_AT",
    "A_BEFORE",
    "A_EVENT_ID",
    "A_NAMESPACE",
    "A_PRINCIPAL",
    "TABLE_NAMESPACE",
    "audit_item",
    "audit_pk",
    "audit_query_entity",
    "audit_query_namespace",
    "audit_sk",
    "decode_audit",
]
