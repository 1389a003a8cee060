"""Bucket shards: the item codec and every expression the acquire paths send."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
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
    get_bool,
    get_n,
    get_s,
    limit_attr,
    n,
    resource_pk,
    s,
)
from zae_limiter.keys.entities import put_new
from zae_limiter.keys.reserves import Flush, decode_reserved, held_deltas, reserve_epoch
from zae_limiter.limits import RESERVED_LIMIT_NAMES
from zae_limiter.models import BucketState


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
        reserved=decode_reserved(item),
    )


@lru_cache(maxsize=1024)
def _consume_expression(
    consumed: tuple[str, ...], checked: tuple[str, ...], reset_window: bool, held: int = 0
) -> tuple[str, str]:
    sets, adds, _values = window_parts(reset_window, 0)
    for i, name in enumerate(consumed):
        adds.append(f"{limit_attr(name, 'tk')} :m{i}")
        adds.append(f"{limit_attr(name, 'tc')} :p{i}")
    # A reserve's count goes to an attribute named by its epoch: a placeholder keeps the
    # expression the same string (and this cache small) from one epoch to the next.
    adds.extend(f"#h{i} :h{i}" for i in range(held))
    conds = []
    for i, name in enumerate(checked):
        conds.append(f"{limit_attr(name, 'tk')} >= :c{i}")
        conds.append(f"{limit_attr(name, 'cp')} = :cp{i}")
        conds.append(f"{limit_attr(name, 'ra')} = :ra{i}")
        conds.append(f"{limit_attr(name, 'rp')} = :rp{i}")
    update = ("SET " + ", ".join(sets) + " " if sets else "") + "ADD " + ", ".join(adds)
    return update, " AND ".join(conds)


@lru_cache(maxsize=1024)
def _config_values(configs: tuple[LimitState, ...]) -> Item:
    """The condition's stored-config values, which change only with the limits: built
    once per set of configs (the request shares the small value dicts, read-only)."""
    values: Item = {}
    for i, cfg in enumerate(configs):
        values[f":cp{i}"] = n(cfg.capacity_milli)
        values[f":ra{i}"] = n(cfg.refill_amount_milli)
        values[f":rp{i}"] = n(cfg.refill_period_ms)
    return values


def speculative_consume(
    table: str,
    bucket_item_key: Item,
    consume_milli: Mapping[str, int],
    configs: Mapping[str, LimitState],
    *,
    now_ms: int = 0,
    reset_window: bool = False,
    hold_milli: Mapping[str, int] | None = None,
    flush: Flush | None = None,
) -> dict[str, Any]:
    """One conditional UpdateItem that takes tokens without reading the bucket first.

    Every limit in `configs` must hold at least its `consume_milli` (0 when not consumed,
    so debt blocks) and carry exactly that stored config: a missing limit or a changed
    config fails the condition, and the caller reads ALL_OLD to decide what to do.

    `hold_milli` also moves a reserve out (see flows/reserve.py): it is taken from `tk`,
    added to this epoch's held count, and granted only if as much again stays behind;
    `flush` reports what the client's reserve spent since its last write.
    """
    hold = {name: amount for name, amount in hold_milli.items() if amount} if hold_milli else {}
    spent = flush.spent if flush else {}
    consumed = tuple(
        name for name in configs if consume_milli.get(name) or name in hold or spent.get(name)
    )
    held = held_deltas(hold, reserve_epoch(now_ms), flush) if hold or flush else {}
    checked = tuple(configs)
    update, condition = _consume_expression(consumed, checked, reset_window, len(held))
    values: Item = window_parts(reset_window, now_ms)[2]
    values.update(_config_values(tuple(configs.values())))
    for i, name in enumerate(consumed):
        values[f":m{i}"] = n(-consume_milli.get(name, 0) - hold.get(name, 0))
        values[f":p{i}"] = n(consume_milli.get(name, 0) + spent.get(name, 0))
    for i, name in enumerate(checked):
        values[f":c{i}"] = n(consume_milli.get(name, 0) + 2 * hold.get(name, 0))
    params: dict[str, Any] = {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if held:
        params["ExpressionAttributeNames"] = {f"#h{i}": attr for i, attr in enumerate(held)}
        for i, amount in enumerate(held.values()):
            values[f":h{i}"] = n(amount)
    return params


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
    hold_milli: Mapping[str, int] | None = None,
    remove: Sequence[str] = (),
    flush: Flush | None = None,
) -> dict[str, Any]:
    """The slow path's write: refill and consume, conditioned on `rf` as it was read.

    Existing limits change by ADD, so speculative writes that land between our read and
    this write (they never touch `rf`) still count; `floor_milli` fails the write rather
    than let such a write drive a consumed limit below zero. A `fenced` write moves `rf`
    to `new_refill_ms`, SETs limits new to the item whole (`new_limits`) and brings every
    limit's stored config up to date; an unfenced one leaves `rf` (the refill waits) and
    fails only if another write moved it meanwhile.
    `hold_milli` adds a reserve to this epoch's held count (the tokens themselves are in
    `token_delta_milli`); `remove` drops held counts that no reader counts any more;
    `flush` reports what the client's reserve spent since its last write.
    """
    sets, adds, values = window_parts(reset_window, new_refill_ms)
    names: dict[str, str] = {}
    conds: list[str] = []
    held = held_deltas(hold_milli or {}, reserve_epoch(new_refill_ms), flush)
    for i, (attr, amount) in enumerate(held.items()):
        names[f"#h{i}"] = attr
        values[f":h{i}"] = n(amount)
        adds.append(f"#h{i} :h{i}")
    spent = flush.spent if flush else {}
    consumed_milli = {
        name: consumed_milli.get(name, 0) + spent.get(name, 0)
        for name in {*consumed_milli, *spent}
        if name not in new_limits
    }
    removed = [f"#x{i}" for i in range(len(remove))]
    names.update(zip(removed, remove, strict=True))
    names["#rf"] = A_REFILL
    conds.append("#rf = :old_rf")
    values[":old_rf"] = n(old_refill_ms)
    if fenced:
        sets.append("#rf = :rf")
        values[":rf"] = n(new_refill_ms)
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
            "REMOVE " + ", ".join(removed) if removed else "",
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


__all__ = [
    "A_SHARD_DOUBLED",
    "A_WCU_LIMIT",
    "A_WINDOW_START",
    "A_WINDOW_WRITES",
    "WINDOW_MS",
    "adjust_tokens",
    "create_bucket",
    "decode_bucket",
    "double_shards",
    "move_tokens",
    "new_bucket_item",
    "partition_wcu",
    "refill_and_consume",
    "speculative_consume",
    "window_parts",
    "with_doubling",
    "write_rate",
]
