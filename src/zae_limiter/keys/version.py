"""The schema version record, and the old (schema 1) bucket layout migrations retire."""

from __future__ import annotations

from typing import Any

from zae_limiter.keys.core import A_REFILL, PK, SK, SK_STATE, TTL, Item, n, s, version_key

# ================================================================ schema version and migrations
# One record per table, at `version_key()`, says which layout the items follow, so a client
# too old for it refuses to write. The schema-1 (pre-shard) bucket layout is spelled here
# only so `zae-limiter migrate` can retire it.
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
    table: str,
    version: int,
    min_client_version: str,
    now_ms: int,
    updated_by: str,
    replaces: int | None = None,
) -> dict[str, Any]:
    """State the schema version, and clear any migration progress.

    `replaces`: only over that version (a migration step's write). A step's write that
    lands late (held in flight, sent by a process that crashed, retried by botocore)
    after a later run moved the table on then fails its condition instead of putting the
    version, and the minimum client version with it, back.
    """
    request: dict[str, Any] = {
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
    if replaces is not None:
        request["ConditionExpression"] = "#v = :was"
        request["ExpressionAttributeValues"][":was"] = n(replaces)
    return request


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


def legacy_bucket_scan(table: str, start_key: Item | None, page_size: int) -> dict[str, Any]:
    """One page of schema-2 bucket items (every namespace): those still holding `rf`,
    which the conversion to full-at times removes."""
    params: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "#sk = :state AND attribute_exists(#rf)",
        "ExpressionAttributeNames": {"#sk": SK, "#rf": A_REFILL},
        "ExpressionAttributeValues": {":state": s(SK_STATE)},
        "Limit": page_size,
    }
    if start_key:
        params["ExclusiveStartKey"] = start_key
    return params


__all__ = [
    "A_MIGRATING_TO",
    "A_MIGRATION_CURSOR",
    "A_MIGRATION_DONE",
    "A_MIGRATION_STARTED",
    "A_MIGRATION_STEP",
    "A_MIN_CLIENT_VERSION",
    "A_SCHEMA_VERSION",
    "A_UPDATED_AT",
    "A_UPDATED_BY",
    "OLD_BUCKET_SK_PREFIX",
    "begin_migration",
    "expire_old_bucket",
    "get_version",
    "legacy_bucket_scan",
    "namespace_of",
    "old_bucket_scan",
    "old_bucket_sk",
    "save_migration_progress",
    "set_version",
]
