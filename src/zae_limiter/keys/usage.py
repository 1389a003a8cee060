"""Usage snapshots and the aggregator's writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from zae_limiter.keys.buckets import (
    A_PREV_WINDOW_START,
    A_PREV_WINDOW_WRITES,
    A_SHARD_DOUBLED,
    A_WINDOW_START,
    A_WINDOW_WRITES,
    snapshot_parts,
)
from zae_limiter.keys.core import (
    A_ENTITY_ID,
    A_KIND,
    A_RESOURCE,
    A_SHARD_COUNT,
    BUCKET_PREFIX,
    GSI2,
    GSI2PK,
    GSI2SK,
    GSI4,
    GSI4PK,
    GSI4SK,
    PK,
    SK,
    TTL,
    Item,
    entity_pk,
    get_n,
    item_key,
    key,
    limit_attr,
    n,
    parse_entity_pk,
    parse_usage_sk,
    resource_pk,
    s,
    usage_sk,
)
from zae_limiter.keys.expiry import with_expiry
from zae_limiter.models import UsageSnapshot

# ======================================================== usage snapshots and the aggregator
# Written by the aggregator only. Usage snapshots live under the entity partition, so one
# query reads an entity's history:
# PK `{ns}/ENTITY#{id}`, SK `#USAGE#{resource}#{window}#{start}`. Counters are exact
# millitokens (`u_{limit}`); `sq_{shard}` is the last stream sequence number of that
# bucket shard already counted, so a re-delivered stream record is never counted twice.

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


#: The full-at attribute of a limit (`b_{name}_fa`), by its suffix.
_FULL_AT_SUFFIX = "_fa"


def delete_drained(table: str, item: Item) -> dict[str, Any]:
    """A shard a merge drained, deleted before a count raise makes room for it again
    (flows/scaling/made.py), only as it was read: its count (at most its id) and every
    limit's full-at time. A write that landed since fails the delete instead of being
    removed with the item unseen."""
    names = {"#shards": A_SHARD_COUNT}
    values = {":shards": item[A_SHARD_COUNT]}
    conds = ["#shards = :shards"]
    fenced = sorted(
        a for a in item if a.startswith(BUCKET_PREFIX) and a.endswith(_FULL_AT_SUFFIX)
    )
    for i, attr in enumerate(fenced):
        names[f"#full_at_{i}"] = attr
        values[f":full_at_{i}"] = item[attr]
        conds.append(f"#full_at_{i} = :full_at_{i}")
    return {
        "TableName": table,
        "Key": item_key(item),
        "ConditionExpression": " AND ".join(conds),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def propagate_shard_count(
    table: str,
    bucket_item_key: Item,
    new_count: int,
    limits: Sequence[str] = (),
    *,
    now_ms: int,
) -> dict[str, Any]:
    """Raise an existing shard's `shard_count` to shard 0's (never lowers it), and
    snapshot its `limits`' full-at values for the shards the raise makes it donor to.

    The write-rate window restarts at `now_ms` (the window before it is dropped): what it
    counted was traffic meant for fewer shards, which must not prove this count hot."""
    sets, names, values = snapshot_parts(limits)
    window = [f"{A_WINDOW_START} = :now_ms", f"{A_WINDOW_WRITES} = :zero"]
    # A sharded bucket never expires (flows/write/plan.py): the raise removes its ttl.
    return with_expiry(
        {
            "TableName": table,
            "Key": bucket_item_key,
            "UpdateExpression": "SET "
            + ", ".join(["#shards = :new_shards", *window, *sets])
            + f" REMOVE {A_PREV_WINDOW_START}, {A_PREV_WINDOW_WRITES}",
            "ConditionExpression": "attribute_exists(#pk) AND #shards < :new_shards",
            # The shard as raised: its quotas' fractions of a token go to shard 0 from it
            # (flows/scaling/fractions.py `settle_donor`).
            "ReturnValues": "ALL_NEW",
            "ExpressionAttributeNames": {"#pk": PK, "#shards": A_SHARD_COUNT, **names},
            "ExpressionAttributeValues": {
                ":new_shards": n(new_count),
                ":now_ms": n(now_ms),
                ":zero": n(0),
                **values,
            },
        },
        None,
    )


def mark_quiet(table: str, shard0_key: Item, shard_count: int, now_ms: int) -> dict[str, Any]:
    """Record on shard 0 that the entity's traffic went low (first time seen)."""
    return {
        "TableName": table,
        "Key": shard0_key,
        "UpdateExpression": "SET #quiet_since = :now_ms",
        "ConditionExpression": "attribute_exists(#pk) AND attribute_not_exists(#quiet_since)"
        " AND #shards = :shards",
        "ExpressionAttributeNames": {
            "#pk": PK,
            "#quiet_since": A_QUIET_SINCE,
            "#shards": A_SHARD_COUNT,
        },
        "ExpressionAttributeValues": {":now_ms": n(now_ms), ":shards": n(shard_count)},
    }


def clear_quiet(table: str, shard0_key: Item) -> dict[str, Any]:
    return {
        "TableName": table,
        "Key": shard0_key,
        "UpdateExpression": "REMOVE #quiet_since",
        "ConditionExpression": "attribute_exists(#quiet_since)",
        "ExpressionAttributeNames": {"#quiet_since": A_QUIET_SINCE},
    }


def merge_update(
    table: str,
    bucket_item_key: Item,
    *,
    old_count: int,
    new_count: int,
    old_full_at: Mapping[str, int | None],
    new_full_at: Mapping[str, int],
    new_split: Mapping[str, int] | None = None,
    shard0_now_ms: int | None = None,
) -> dict[str, Any]:
    """One shard's part of a merge transaction (a TransactWriteItems `Update`).

    Fenced on `shard_count = old_count` and on every limit's full-at time as read (no
    write may land in between: the merge runs on quiet entities); SETs the halved count,
    the new full-at times and (`new_split`) the split snapshots that shards not made yet
    will copy. On shard 0 (`shard0_now_ms`) the change time `sd` is set and the quiet
    mark cleared.
    """
    names = {"#pk": PK, "#shards": A_SHARD_COUNT}
    values: Item = {":shards": n(old_count), ":new_shards": n(new_count)}
    sets = ["#shards = :new_shards"]
    conds = ["attribute_exists(#pk)", "#shards = :shards"]
    for i, name in enumerate(sorted(new_full_at)):
        names[f"#full_at_{i}"] = limit_attr(name, "fa")
        values[f":full_at_{i}"] = n(new_full_at[name])
        sets.append(f"#full_at_{i} = :full_at_{i}")
        old = old_full_at.get(name)
        if old is None:
            conds.append(f"attribute_not_exists(#full_at_{i})")
        else:
            values[f":was_full_at_{i}"] = n(old)
            conds.append(f"#full_at_{i} = :was_full_at_{i}")
    for i, name in enumerate(sorted(new_split or {})):
        names[f"#split_{i}"] = limit_attr(name, "sf")
        values[f":split_{i}"] = n((new_split or {})[name])
        sets.append(f"#split_{i} = :split_{i}")
    update = "SET " + ", ".join(sets)
    if shard0_now_ms is not None:
        names.update({"#doubled_at": A_SHARD_DOUBLED, "#quiet_since": A_QUIET_SINCE})
        values[":doubled_at"] = n(shard0_now_ms)
        update += ", #doubled_at = :doubled_at REMOVE #quiet_since"
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": update,
        "ConditionExpression": " AND ".join(conds),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def merge_transaction(
    updates: list[dict[str, Any]], table: str = "", absent: Sequence[Item] = ()
) -> dict[str, Any]:
    """The merge's one transaction: its updates, and a check that each shard the plan
    took as never made (`absent` keys; its share is in a snapshot) still is not."""
    checks = [
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": key,
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": PK},
            }
        }
        for key in absent
    ]
    return {"TransactItems": [{"Update": u} for u in updates] + checks}


def table_from_stream_arn(arn: str) -> str | None:
    """`arn:aws:dynamodb:{region}:{account}:table/{name}/stream/{label}` -> name."""
    _, sep, rest = arn.partition(":table/")
    return rest.split("/", 1)[0] or None if sep else None


# ======================================================== end of usage / aggregator section


__all__ = [
    "A_QUIET_SINCE",
    "A_USAGE_EVENTS",
    "A_USAGE_WINDOW",
    "A_USAGE_WINDOW_START",
    "KIND_USAGE",
    "SK_USAGE_PREFIX",
    "STREAM_INSERT",
    "STREAM_MODIFY",
    "STREAM_REMOVE",
    "TC_SUFFIX",
    "USAGE_COUNTER_PREFIX",
    "USAGE_FENCE_PREFIX",
    "USAGE_INDEX_PREFIX",
    "batch_get_consistent",
    "clear_quiet",
    "decode_usage",
    "delete_drained",
    "mark_quiet",
    "merge_transaction",
    "merge_update",
    "propagate_shard_count",
    "table_from_stream_arn",
    "usage_counter_attr",
    "usage_fence_attr",
    "usage_fences",
    "usage_key",
    "usage_query_entity",
    "usage_query_namespace",
    "usage_query_resource",
    "usage_sk_prefix",
    "usage_update",
]
