"""Bucket shards: the item codec and every expression the acquire paths send."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zae_limiter.bucket import LimitState
from zae_limiter.keys.core import (
    A_CASCADE,
    A_ENTITY_ID,
    A_PARENT,
    A_REFILL,
    A_RESOURCE,
    A_SHARD_COUNT,
    A_SHARD_ID,
    BUCKET_PREFIX,
    FIELDS,
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
from zae_limiter.keys.entities import A_BYPASS, put_new
from zae_limiter.keys.expiry import with_expiry
from zae_limiter.keys.reserves import held_epoch
from zae_limiter.limits import RESERVED_LIMIT_NAMES
from zae_limiter.models import BucketState
from zae_limiter.quota import Window, window_of

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


def _limit_numbers(
    item: Mapping[str, Any],
) -> tuple[dict[str, dict[str, int]], dict[str, dict[int, int]]]:
    """(limit -> stored field -> number, limit -> epoch -> held count): one pass over the
    item, since this runs once per acquire (decode_reserved is the held counts alone)."""
    fields: dict[str, dict[str, int]] = {}
    reserved: dict[str, dict[int, int]] = {}
    for attr, value in item.items():
        parsed = _PARSED.get(attr)
        if parsed is None:
            parsed = _parse_attr(attr)
        name, field, epoch = parsed
        if not name:
            continue
        number = value.get("N")
        if number is None:
            continue
        if field:
            fields.setdefault(name, {})[field] = int(number)
        else:
            reserved.setdefault(name, {})[epoch] = int(number)
    return fields, reserved


#: What each attribute name says, parsed once: (limit, stored field, "") or (limit, "",
#: held-count epoch), ("", "", 0) for any other attribute. Items share few names; the
#: epochs in held counts make new ones as time passes, so the memo is bounded.
_PARSED: dict[str, tuple[str, str, int]] = {}
_PARSED_MAX = 4096


def _parse_attr(attr: str) -> tuple[str, str, int]:
    parsed = ("", "", 0)
    if attr.startswith(BUCKET_PREFIX):
        name, _, field = attr[len(BUCKET_PREFIX) :].rpartition("_")
        if name and field in FIELDS:
            if name not in RESERVED_LIMIT_NAMES:
                parsed = (name, field, 0)
        elif name and (epoch := held_epoch(field)) is not None:
            parsed = (name, "", epoch)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[attr] = parsed
    return parsed


#: A refilling limit's period is whole seconds; a quota's stored period is 1 ms
#: (limits.py), so only those items are looked at for a window.
QUOTA_PERIOD_BELOW = 1000


def _window(item: Mapping[str, Any], name: str) -> Window | None:
    """A quota's window as its bucket item records it (`b_{name}_qr`, written with the
    item: what `entity shards show` reads, having no config)."""
    spec = item.get(limit_attr(name, A_QUOTA_RESET))
    return None if spec is None else window_of(spec["S"])


def decode_bucket(item: Mapping[str, Any]) -> BucketState:
    fields, reserved = _limit_numbers(item)
    limits: dict[str, LimitState] = {}
    legacy: dict[str, int] = {}
    snapshots: dict[str, int] = {}
    # One loop, not three comprehensions: each of those is a call of its own, per acquire.
    for name, f in fields.items():
        if not ("cp" in f and "ra" in f and "rp" in f and f["rp"] > 0 and f["ra"] > 0):
            continue
        limits[name] = LimitState(
            capacity_milli=f["cp"],
            refill_amount_milli=f["ra"],
            refill_period_ms=f["rp"],
            total_consumed_milli=f.get("tc", 0),
            full_at=f.get("fa"),
            window=_window(item, name) if f["rp"] < QUOTA_PERIOD_BELOW else None,
        )
        # A schema-v2 limit (`tk` as of `rf`, no `fa` yet): its first write converts it.
        if "tk" in f and "fa" not in f:
            legacy[name] = f["tk"]
        # Negative: the limit had no full-at time when the count rose (`snapshot_parts`).
        if f.get("sf", -1) >= 0:
            snapshots[name] = f["sf"]
    # The item's own attributes read directly (get_s, get_n, get_bool, inline: this
    # runs once per acquire).
    get = item.get
    entity, resource, shard, count = (
        get(A_ENTITY_ID),
        get(A_RESOURCE),
        get(A_SHARD_ID),
        get(A_SHARD_COUNT),
    )
    refill, cascade, parent = get(A_REFILL), get(A_CASCADE), get(A_PARENT)
    start, writes, wcu = get(A_WINDOW_START), get(A_WINDOW_WRITES), get(A_WCU_LIMIT)
    return BucketState(
        entity_id=str(entity["S"]) if entity is not None else "",
        resource=str(resource["S"]) if resource is not None else "",
        shard_id=int(shard["N"]) if shard is not None else 0,
        shard_count=max(1, int(count["N"])) if count is not None else 1,
        last_refill_ms=int(refill["N"]) if refill is not None else 0,
        limits=limits,
        cascade=bool(cascade and cascade.get("BOOL")),
        parent_id=str(parent["S"]) if parent is not None else None,
        partition_wcu=(int(wcu["N"]) if wcu is not None else 0) or _WCU_UNRECORDED,
        window_start_ms=int(start["N"]) if start is not None else -1,
        window_writes=int(writes["N"]) if writes is not None else 0,
        reserved=reserved,
        legacy_tokens=legacy,
        split_full_at=snapshots,
    )


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


#: A bucket's partition write capacity when its item records none (`b_wcu_cp`).
_WCU_UNRECORDED = 1000


def written_facts(item: Mapping[str, Any]) -> tuple[int, bool, str | None, bool, int]:
    """What a write's ALL_NEW tells a client beyond its limits, read directly (decoding
    the whole item costs more than the rest of a write's client-side work): (shard
    count, cascade, parent, bypass, the write-rate window's start or -1)."""
    get = item.get
    count, cascade, parent = get(A_SHARD_COUNT), get(A_CASCADE), get(A_PARENT)
    bypass, start = get(A_BYPASS), get(A_WINDOW_START)
    return (
        max(1, int(count["N"])) if count is not None else 1,
        bool(cascade and cascade.get("BOOL")),
        str(parent["S"]) if parent is not None else None,
        bool(bypass and bypass.get("BOOL")),
        int(start["N"]) if start is not None else -1,
    )


def partition_wcu(item: Mapping[str, Any], default: int = _WCU_UNRECORDED) -> int:
    return get_n(item, A_WCU_LIMIT, default) or default


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
    # A sharded bucket never expires (flows/expiry.py): the raise removes its ttl.
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
    "QUOTA_PERIOD_BELOW",
    "SPLIT",
    "WINDOW_MS",
    "create_bucket",
    "create_split_bucket",
    "decode_bucket",
    "delete_marked",
    "double_shards",
    "mark_deleting",
    "new_bucket_item",
    "partition_wcu",
    "shards_read",
    "snapshot_parts",
    "window_parts",
    "with_doubling",
    "write_rate",
    "written_facts",
]
