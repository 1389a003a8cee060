"""Entity records and stored limit configs (with the failure policy): items, queries, codecs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from zae_limiter.keys.core import (
    A_CASCADE,
    A_CREATED,
    A_ENTITY_ID,
    A_KIND,
    A_LIMITS,
    A_NAME,
    A_PARENT,
    GSI1,
    GSI1PK,
    GSI1SK,
    GSI3,
    GSI3PK,
    GSI3SK,
    GSI4,
    GSI4PK,
    GSI4SK,
    PK,
    SK,
    Item,
    entity_key,
    entity_pk,
    get_bool,
    get_s,
    n,
    parent_pk,
    s,
)
from zae_limiter.limits import Limit
from zae_limiter.models import Entity
from zae_limiter.quota import parse_spec
from zae_limiter.schedule import Override


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
    if entity.bypass:
        item[A_BYPASS] = {"BOOL": True}
    if entity.cascade_for:
        item[A_CASCADE_FOR] = s(_encode_cascade_for(entity.cascade_for))
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
        cascade_for=_decode_cascade_for(get_s(item, A_CASCADE_FOR)),
        bypass=get_bool(item, A_BYPASS),
    )


#: An entity whose acquires take nothing (written only when set).
A_BYPASS = "bypass"


#: Per-resource cascade on an entity record: `+R` cascades, `-R` does not, joined by '#'
#: (which no resource name holds). A string, so "unchanged since read" can compare it.
A_CASCADE_FOR = "cascade_for"


def _encode_cascade_for(pairs: Iterable[tuple[str, bool]]) -> str:
    return "#".join(("+" if on else "-") + resource for resource, on in sorted(pairs))


def _decode_cascade_for(text: str | None) -> tuple[tuple[str, bool], ...]:
    if not text:
        return ()
    return tuple(sorted((part[1:], part[0] == "+") for part in text.split("#")))


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
#: A quota's window in a stored limit config (`Window.spec`: `cron:{expr}@{tz}` or
#: `after:{ms}`); its `ra` and `rp` are 0 (schema v4).
A_LIMIT_RESET = "qr"
#: A soft limit (counts, never rejects); absent on a limit that enforces. A client that
#: predates it ignores it and enforces the limit (docs/quotas.md, "Soft limits").
A_LIMIT_SOFT = "sf"
#: A global limit's regions, in order (docs/global.md); absent on a limit of each region.
A_LIMIT_REGIONS = "rg"


def encode_limits(limits: Iterable[Limit]) -> dict[str, Any]:
    return {"M": {limit.name: {"M": _encode_limit(limit)} for limit in limits}}


def _encode_limit(limit: Limit) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "cp": n(limit.capacity),
        "ra": n(limit.refill_amount),
        "rp": n(limit.refill_period_seconds),
    }
    if limit.window is not None:
        fields[A_LIMIT_RESET] = s(limit.window.spec())
    if limit.soft:
        fields[A_LIMIT_SOFT] = {"BOOL": True}
    if limit.regions:
        fields[A_LIMIT_REGIONS] = {"L": [s(region) for region in limit.regions]}
    if limit.schedule:
        fields[A_LIMIT_SCHEDULE] = {"L": [{"M": _encode_override(o)} for o in limit.schedule]}
    return fields


#: A scheduled limit's overrides in a stored limit config (schema v5): a list of maps
#: with the start and end cron expressions, the zone, and the numbers in force between.
A_LIMIT_SCHEDULE = "sd"


def _encode_override(item: Override) -> dict[str, Any]:
    return {
        "on": s(item.start),
        "off": s(item.end),
        "tz": s(item.tz),
        "cp": n(item.capacity),
        "ra": n(item.refill_amount),
        "rp": n(item.refill_period_seconds),
    }


def _decode_override(fields: Mapping[str, Any]) -> Override:
    return Override(
        fields["on"]["S"],
        fields["off"]["S"],
        fields["tz"]["S"],
        int(fields["cp"]["N"]),
        int(fields["ra"]["N"]),
        int(fields["rp"]["N"]),
    )


def decode_limits(item: Mapping[str, Any]) -> tuple[Limit, ...]:
    stored = item.get(A_LIMITS, {}).get("M", {})
    return tuple(_decode_limit(name, v["M"]) for name, v in sorted(stored.items()))


def _decode_limit(name: str, fields: Mapping[str, Any]) -> Limit:
    reset = fields.get(A_LIMIT_RESET)
    return Limit(
        name,
        int(fields["cp"]["N"]),
        int(fields["ra"]["N"]),
        int(fields["rp"]["N"]),
        window=None if reset is None else parse_spec(reset["S"]),
        soft=bool(fields.get(A_LIMIT_SOFT, {}).get("BOOL", False)),
        regions=tuple(r["S"] for r in fields.get(A_LIMIT_REGIONS, {}).get("L", ())),
        schedule=tuple(
            _decode_override(o["M"]) for o in fields.get(A_LIMIT_SCHEDULE, {}).get("L", ())
        ),
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


#: On the system config item: what acquire does when DynamoDB is unavailable.
A_ON_UNAVAILABLE = "on_unavailable"

#: On any config item: the idle seconds after which a full bucket's item expires
#: (flows/write/plan.py; 0: never), for the entities and resources the level covers.
A_BUCKET_TTL = "bucket_ttl"


def bucket_ttl_of(item: Mapping[str, Any] | None) -> int | None:
    value = (item or {}).get(A_BUCKET_TTL)
    return None if value is None else int(value["N"])


def with_bucket_ttl(item: Item, seconds: int | None) -> Item:
    out = {k: v for k, v in item.items() if k != A_BUCKET_TTL}
    if seconds is not None:
        out[A_BUCKET_TTL] = n(seconds)
    return out


__all__ = [
    "A_BUCKET_TTL",
    "A_BYPASS",
    "A_CASCADE_FOR",
    "A_LIMIT_REGIONS",
    "A_LIMIT_RESET",
    "A_LIMIT_SCHEDULE",
    "A_LIMIT_SOFT",
    "A_ON_UNAVAILABLE",
    "bucket_query_for_entity",
    "bucket_ttl_of",
    "config_item",
    "decode_entity",
    "decode_limits",
    "encode_entity",
    "encode_limits",
    "entity_query_children",
    "entity_query_items",
    "namespace_query_entities",
    "put_new",
    "with_bucket_ttl",
]
