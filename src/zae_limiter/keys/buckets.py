"""Bucket shards: the item as first made, given back to, split, doubled and deleted, and
the partition's write-rate window. An acquire's write and the item it reads back are
keys/takes.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zae_limiter.keys.core import (
    A_CASCADE,
    A_ENTITY_ID,
    A_PARENT,
    A_REFILL,
    A_RESOURCE,
    A_SHARD_COUNT,
    A_SHARD_ID,
    GSI2PK,
    GSI2SK,
    GSI3PK,
    GSI3SK,
    GSI4PK,
    GSI4SK,
    PK,
    Item,
    bucket_key,
    entity_pk,
    get_n,
    limit_attr,
    n,
    resource_pk,
    s,
)
from zae_limiter.keys.entities import put_new
from zae_limiter.keys.expiry import with_expiry
from zae_limiter.models import BucketState

#: A quota's window on its bucket item (`b_{name}_qr`, `Window.spec()`).
A_QUOTA_RESET = "qr"


# ---------------------------------------------------------------- buckets
def new_bucket_item(ns: str, bucket: BucketState, now_ms: int) -> Item:
    """A bucket item as first written. Its index keys never change afterwards."""
    e, r, shard = bucket.entity_id, bucket.resource, bucket.shard_id
    item: Item = {
        **bucket_key(ns, e, r, shard),
        A_ENTITY_ID: s(e),
        A_RESOURCE: s(r),
        A_SHARD_ID: n(shard),
        A_SHARD_COUNT: n(bucket.shard_count),
        A_CASCADE: {"BOOL": bucket.cascade},
        A_WCU_LIMIT: n(bucket.partition_wcu),
        A_WINDOW_START: n(now_ms),
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
        if state.full_at is not None:
            item[limit_attr(name, "fa")] = n(state.full_at)
        if name in bucket.split_full_at:
            item[limit_attr(name, "sf")] = n(bucket.split_full_at[name])
        item[limit_attr(name, "cp")] = n(state.capacity_milli)
        item[limit_attr(name, "ra")] = n(state.refill_amount_milli)
        item[limit_attr(name, "rp")] = n(state.refill_period_ms)
        item[limit_attr(name, "tc")] = n(state.total_consumed_milli)
        if state.window is not None:
            item[limit_attr(name, A_QUOTA_RESET)] = s(state.window.spec())
    return item


def create_bucket(table: str, item: Item) -> dict[str, Any]:
    return {
        **put_new(table, item),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


#: On shard 0: an entity deletion under way; no shard k >= 1 may be made from then on.
A_DELETING = "dl"


def create_split_bucket(table: str, item: Item, shard0: Item, count: int) -> dict[str, Any]:
    """Shard k >= 1 made (a TransactWriteItems): the put, if the shard is still unmade,
    and a check that shard 0 still exists at `count` with no deletion under way. A
    client that knew the entity before its deletion cannot bring a shard back after the
    deletion has looked (flows/records/entities.py)."""
    check = {
        "TableName": table,
        "Key": shard0,
        "ConditionExpression": (
            "attribute_exists(#pk) AND #shards = :shards AND attribute_not_exists(#deleting)"
        ),
        "ExpressionAttributeNames": {"#pk": PK, "#shards": A_SHARD_COUNT, "#deleting": A_DELETING},
        "ExpressionAttributeValues": {":shards": n(count)},
    }
    return {"TransactItems": [{"Put": create_bucket(table, item)}, {"ConditionCheck": check}]}


def mark_deleting(table: str, shard0: Item) -> dict[str, Any]:
    """Shard 0 marked as being deleted (its item as it then stands: ALL_NEW), if it
    exists; from then on no shard k >= 1 of its bucket can be made."""
    return {
        "TableName": table,
        "Key": shard0,
        "UpdateExpression": "SET #deleting = :yes",
        "ConditionExpression": "attribute_exists(#pk)",
        "ExpressionAttributeNames": {"#pk": PK, "#deleting": A_DELETING},
        "ExpressionAttributeValues": {":yes": n(1)},
        "ReturnValues": "ALL_NEW",
    }


def delete_marked(table: str, shard0: Item) -> dict[str, Any]:
    """Shard 0 deleted, the last of a deletion's writes, only while it is still marked:
    once a deletion is done (by its own process, or finished by a client that met the
    mark) a client may start the bucket afresh, and a late delete must not take that
    fresh shard 0 with it."""
    return {
        "TableName": table,
        "Key": shard0,
        "ConditionExpression": "attribute_exists(#deleting)",
        "ExpressionAttributeNames": {"#deleting": A_DELETING},
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
#: The window before the current one (it ended at `ws`): a restart moves `ws`/`wn` here,
#: so an image just after a restart still shows the rate (flows/scaling/evidence.py).
A_PREV_WINDOW_START = "wps"
A_PREV_WINDOW_WRITES = "wpn"
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


def shards_read(
    table: str, ns: str, entity_id: str, resource: str, shard_ids: Sequence[int]
) -> dict[str, Any]:
    """A consistent BatchGetItem of whole shards: several items a flow needs at once,
    read in one round trip instead of one GetItem each."""
    wanted = [bucket_key(ns, entity_id, resource, i) for i in shard_ids]
    return {"RequestItems": {table: {"Keys": wanted, "ConsistentRead": True}}}


def window_parts(reset: bool) -> tuple[list[str], list[str]]:
    """(SET parts, ADD parts) that count `:writes` writes in the item's window; a restart
    (at `:now_ms`) keeps the window it ends (`:zero`, for an item that had none)."""
    if reset:
        return [
            f"{A_PREV_WINDOW_START} = if_not_exists({A_WINDOW_START}, :now_ms)",
            f"{A_PREV_WINDOW_WRITES} = if_not_exists({A_WINDOW_WRITES}, :zero)",
            f"{A_WINDOW_START} = :now_ms",
            f"{A_WINDOW_WRITES} = :writes",
        ], []
    return [], [f"{A_WINDOW_WRITES} :writes"]


#: A full-at value that says "none when the count rose" (full-at values are never negative).
NO_SNAPSHOT = -1
#: The placeholders of a limit's full-at time and its snapshot (`#full_at_0`, `#split_0`),
#: as keys/takes.py numbers them.
FULL_AT, SPLIT = "#full_at", "#split"


def snapshot_parts(limits: Sequence[str]) -> tuple[list[str], dict[str, str], Item]:
    """(SET parts, names, values) that record each limit's full-at value as the write that
    raises a shard's count finds it (`sf`; right-hand sides read the item before the write).

    A shard that a doubling made is created later, by its first acquire, from its donor's
    `sf`: what the donor held at the doubling. Copying the donor's `fa` as it is then would
    copy what the donor took since, a second time (tokens lost). The donor's own takes
    count against its `fa` alone."""
    sets, names = [], {}
    for i, name in enumerate(limits):
        names[f"{SPLIT}_{i}"] = limit_attr(name, "sf")
        names[f"{FULL_AT}_{i}"] = limit_attr(name, "fa")
        sets.append(f"{SPLIT}_{i} = if_not_exists({FULL_AT}_{i}, :no_snapshot)")
    return sets, names, ({":no_snapshot": n(NO_SNAPSHOT)} if sets else {})


def double_shards(
    table: str,
    shard0_key: Item,
    old_count: int,
    new_count: int,
    now_ms: int,
    measured_since: int,
    limits: Sequence[str] = (),
) -> dict[str, Any]:
    """Raise `shard_count` on shard 0, snapshot its `limits`' full-at values (see
    `snapshot_parts`) and restart its write-rate window.

    Refused when someone already changed the count, or when the rate that prompted it was
    measured (partly) before the last doubling: each doubling must be judged on traffic
    spread over the count it produced, or a burst would double again and again. Refused
    as well while shard 0 is a schema-2 item (`rf`, tokens `tk` as of it): its `tk` is the
    whole bucket's, and read at the raised count it would become shard 0's share, the new
    shards getting theirs besides (the fault simulator's seed 2917: tokens created). The
    next take on it converts it (a take that doubles too converts it in the same write,
    `with_doubling`), and a later try raises the count.
    """
    snap_sets, snap_names, snap_values = snapshot_parts(limits)
    sets = ["#shards = :new_shards", "#doubled_at = :now_ms", "#window_at = :now_ms"]
    # A sharded bucket never expires (flows/write/plan.py): the raise removes its ttl.
    return with_expiry(
        {
            "TableName": table,
            "Key": shard0_key,
            "UpdateExpression": "SET "
            + ", ".join([*sets, "#writes = :zero", *snap_sets])
            + f" REMOVE {A_PREV_WINDOW_START}, {A_PREV_WINDOW_WRITES}",
            "ConditionExpression": "#shards = :shards"
            " AND (attribute_not_exists(#doubled_at) OR #doubled_at <= :measured_since)"
            " AND attribute_not_exists(#refilled)",
            "ExpressionAttributeNames": {
                "#shards": A_SHARD_COUNT,
                "#doubled_at": A_SHARD_DOUBLED,
                "#refilled": A_REFILL,
                "#window_at": A_WINDOW_START,
                "#writes": A_WINDOW_WRITES,
                **snap_names,
            },
            "ExpressionAttributeValues": {
                ":new_shards": n(new_count),
                ":shards": n(old_count),
                ":now_ms": n(now_ms),
                ":measured_since": n(measured_since),
                ":zero": n(0),
                **snap_values,
            },
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
        None,
    )


def with_doubling(
    params: Mapping[str, Any], old_count: int, new_count: int, now_ms: int, measured_since: int
) -> dict[str, Any]:
    """An acquire's UpdateItem on shard 0 that also doubles `shard_count` (same fences as
    `double_shards`). When shard 0 is throttled, a separate doubling write rarely gets in:
    riding on a write the client sends anyway, the first one to get in doubles.

    The take it rides on was planned at the old count, so shard 0's full-at values after
    it are what it holds at the doubling: the snapshot the split copies (`snapshot_parts`)
    is each value as this write leaves it (the stored value plus the take's ADD, or the
    value its SET writes). Neither a stale snapshot nor none may stand: a shard created
    from the donor's `fa` as it finds it later would copy a give-back the donor received
    in between a second time (tokens created; found by the fault simulator)."""
    update = str(params["UpdateExpression"])
    names = params.get("ExpressionAttributeNames", {})
    values = dict(params["ExpressionAttributeValues"])
    # A REBASE also rebases the snapshot the last raise took (keys/takes.py): this raise
    # takes a new one, which replaces it (one SET per attribute).
    for placeholder in [p for p in names if p.startswith(SPLIT)]:
        value = ":" + placeholder[1:]
        update = update.replace(f", {placeholder} = {value}", "")
        values.pop(value, None)
    snaps = [
        _snapshot_after(update, placeholder, str(attr))
        for placeholder, attr in names.items()
        if placeholder.startswith(FULL_AT)
    ]
    sets = ", ".join(
        ["#shards = :doubled_shards", "#doubled_at = :doubled_at", *(part for part, _ in snaps)]
    )
    update = f"SET {sets}, {update[4:]}" if update.startswith("SET ") else f"SET {sets} {update}"
    condition = (
        f"({params['ConditionExpression']}) AND #shards = :doubled_from"
        " AND (attribute_not_exists(#doubled_at) OR #doubled_at <= :measured_since)"
    )
    return {
        **params,
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {
            **params.get("ExpressionAttributeNames", {}),
            "#shards": A_SHARD_COUNT,
            "#doubled_at": A_SHARD_DOUBLED,
            **{alias: attr for _, (alias, attr) in snaps},
        },
        "ExpressionAttributeValues": {
            **values,
            **({":no_snapshot": n(NO_SNAPSHOT)} if ":no_snapshot" in sets else {}),
            ":doubled_shards": n(new_count),
            ":doubled_from": n(old_count),
            ":doubled_at": n(now_ms),
            ":measured_since": n(measured_since),
        },
    }


def _snapshot_after(update: str, full_at: str, fa_attr: str) -> tuple[str, tuple[str, str]]:
    """The SET part that snapshots one limit's full-at value as the take in `update`
    leaves it, and the name it needs: (part, (placeholder, attribute))."""
    suffix = full_at[len(FULL_AT) :]
    split = SPLIT + suffix
    snap = (split, fa_attr[: -len("fa")] + "sf")
    if f"{full_at} :delta{suffix}" in update:  # ADD: the stored value grows by the take
        return f"{split} = {full_at} + :delta{suffix}", snap
    if f"{full_at} = :full_at{suffix}" in update:  # SET: the value written
        return f"{split} = :full_at{suffix}", snap
    return f"{split} = if_not_exists({full_at}, :no_snapshot)", snap


def give_back_write(
    table: str,
    bucket_item_key: Item,
    back: Mapping[str, int],
    consumed: Mapping[str, int],
    held_adds: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Tokens back to a bucket: `ADD fa -amount` per limit (a full-at time moved into
    the past only says the bucket is full), `tc` by `consumed`, held counts by
    `held_adds`. Unconditional but for the item existing: a deleted bucket stays deleted.
    Never retried on an unknown outcome, since a second ADD would create tokens."""
    names: dict[str, str] = {"#pk": PK}
    values: Item = {}
    adds: list[str] = []
    for i, (name, amount) in enumerate(back.items()):
        if amount:
            names[f"#full_at_{i}"] = limit_attr(name, "fa")
            values[f":delta_{i}"] = n(-amount)
            adds.append(f"#full_at_{i} :delta_{i}")
    for i, (name, milli) in enumerate(consumed.items()):
        if milli:
            names[f"#used_{i}"] = limit_attr(name, "tc")
            values[f":used_{i}"] = n(milli)
            adds.append(f"#used_{i} :used_{i}")
    for j, (attr, milli) in enumerate((held_adds or {}).items()):
        if milli:
            names[f"#reserve{j}"] = attr
            values[f":reserve{j}"] = n(milli)
            adds.append(f"#reserve{j} :reserve{j}")
    if not adds:
        # nothing to move: still a valid request that only checks the item exists
        names["#writes"] = A_WINDOW_WRITES
        values[":zero"] = n(0)
        adds.append("#writes :zero")
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": "ADD " + ", ".join(adds),
        "ConditionExpression": "attribute_exists(#pk)",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def set_shard_count(
    table: str,
    bucket_item_key: Item,
    old_count: int,
    new_count: int,
    limits: Sequence[str] = (),
    now_ms: int | None = None,
) -> dict[str, Any]:
    """A donor shard's split: SET its count under the count it had, and snapshot its
    `limits`' full-at values (`snapshot_parts`). Its full-at times stay: at the higher
    count the same times mean a smaller share, and the new shard copies the snapshot, so
    the two together hold what the donor held.

    With `now_ms`, its write-rate window restarts then (the one before is dropped), as a
    propagated count's does: what it counted was traffic meant for fewer shards, which
    must not prove the new count hot (measured: `reserve=False` at 8x a partition went
    from 16 to 32 shards within 2-4 s of reaching 16, on donors' windows that showed
    100-136% of their limit from before the split)."""
    sets, names, values = snapshot_parts(limits)
    extra = ""
    if now_ms is not None:
        sets = [*sets, f"{A_WINDOW_START} = :now_ms", f"{A_WINDOW_WRITES} = :zero"]
        values = {**values, ":now_ms": n(now_ms), ":zero": n(0)}
        extra = f" REMOVE {A_PREV_WINDOW_START}, {A_PREV_WINDOW_WRITES}"
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": "SET " + ", ".join(["#shards = :new_shards", *sets]) + extra,
        "ConditionExpression": "attribute_exists(#pk) AND #shards = :shards",
        "ExpressionAttributeNames": {"#pk": PK, "#shards": A_SHARD_COUNT, **names},
        "ExpressionAttributeValues": {
            ":new_shards": n(new_count),
            ":shards": n(old_count),
            **values,
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def held_adds_of(params: Mapping[str, Any]) -> dict[str, int]:
    """The held counts a take or give-back write moves (attribute -> millitokens ADDed),
    read back from its request (the fault simulator judges what a grant left behind)."""
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    out: dict[str, int] = {}
    for alias, attr in names.items():
        value = values.get(":" + alias[1:]) if alias.startswith("#reserve") else None
        if value is not None:
            out[str(attr)] = int(value["N"])
    return out


__all__ = [
    "A_DELETING",
    "A_PREV_WINDOW_START",
    "A_PREV_WINDOW_WRITES",
    "A_QUOTA_RESET",
    "A_SHARD_DOUBLED",
    "A_WCU_LIMIT",
    "A_WINDOW_START",
    "A_WINDOW_WRITES",
    "FULL_AT",
    "NO_SNAPSHOT",
    "SPLIT",
    "WINDOW_MS",
    "create_bucket",
    "create_split_bucket",
    "delete_marked",
    "double_shards",
    "give_back_write",
    "held_adds_of",
    "mark_deleting",
    "new_bucket_item",
    "set_shard_count",
    "shards_read",
    "snapshot_parts",
    "window_parts",
    "with_doubling",
    "write_rate",
]
