"""The writes that take tokens from a bucket shard: the speculative write in its two
shapes (an `ADD` under a ceiling, a refill under a proof the bucket is full) and the
write planned from a read. flows/speculative.py and flows/bucket_write.py choose them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from zae_limiter.bucket import LimitState
from zae_limiter.keys.buckets import window_parts
from zae_limiter.keys.core import A_REFILL, A_SHARD_COUNT, PK, Item, limit_attr, n
from zae_limiter.keys.reserves import Flush, held_deltas, reserve_attr, reserve_epoch


@dataclass(frozen=True, slots=True)
class Ceiling:
    """Bounds that make a take without refill exact (flows/speculative.py says how they are
    chosen). Such a take leaves the refill for a later write, which is exact only if the
    refill would not have clamped now: `tk + refill since rf <= capacity - held`. A
    condition cannot add, so the write bounds each term: `rf >= refilled_since`, `tk <=
    tokens`, this epoch's and the previous epoch's held count `<= held` / `held_before`
    (the only ones readers count) and `shard_count <= shard_count` (the share is no smaller).
    """

    refilled_since: int
    shard_count: int
    epoch: int
    tokens: Mapping[str, int]
    held: Mapping[str, int]
    held_before: Mapping[str, int]


@lru_cache(maxsize=1024)
def _consume_expression(
    consumed: tuple[str, ...],
    checked: tuple[str, ...],
    reset_window: bool,
    held: int = 0,
    ceiled: bool = False,
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
        if ceiled:
            conds.append(f"{limit_attr(name, 'tk')} <= :k{i}")
            conds.append(f"(attribute_not_exists(#q{i}) OR #q{i} <= :q{i})")
            conds.append(f"(attribute_not_exists(#o{i}) OR #o{i} <= :o{i})")
    if ceiled:
        conds.append("#rf >= :rmin")
        conds.append("(attribute_not_exists(#sc) OR #sc <= :scmax)")
    update = ("SET " + ", ".join(sets) + " " if sets else "") + "ADD " + ", ".join(adds)
    return update, " AND ".join(conds)


def _ceiling_parts(
    ceiling: Ceiling, checked: tuple[str, ...], names: dict[str, str], values: Item
) -> None:
    names["#rf"] = A_REFILL
    names["#sc"] = A_SHARD_COUNT
    values[":rmin"] = n(ceiling.refilled_since)
    values[":scmax"] = n(ceiling.shard_count)
    for i, name in enumerate(checked):
        names[f"#q{i}"] = reserve_attr(name, ceiling.epoch)
        names[f"#o{i}"] = reserve_attr(name, ceiling.epoch - 1)
        values[f":k{i}"] = n(ceiling.tokens[name])
        values[f":q{i}"] = n(ceiling.held.get(name, 0))
        values[f":o{i}"] = n(ceiling.held_before.get(name, 0))


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
    ceiling: Ceiling | None = None,
) -> dict[str, Any]:
    """One conditional UpdateItem that takes tokens without reading the bucket first.

    Every limit in `configs` must hold at least its `consume_milli` (0 when not consumed,
    so debt blocks) and carry exactly that stored config: a missing limit or a changed
    config fails the condition, and the caller reads ALL_OLD to decide what to do.

    `hold_milli` also moves a reserve out (see flows/reserve.py): it is taken from `tk`,
    added to this epoch's held count, and granted only if as much again stays behind;
    `flush` reports what the client's reserve spent since its last write. `ceiling`
    (every limit in `configs` bounded) makes sure the refill it leaves for later would not
    have clamped; without it, a bucket that sat full gives its lost refill away.
    """
    hold = {name: amount for name, amount in hold_milli.items() if amount} if hold_milli else {}
    spent = flush.spent if flush else {}
    consumed = tuple(
        name for name in configs if consume_milli.get(name) or name in hold or spent.get(name)
    )
    held = held_deltas(hold, reserve_epoch(now_ms), flush) if hold or flush else {}
    checked = tuple(configs)
    update, condition = _consume_expression(
        consumed, checked, reset_window, len(held), ceiling is not None
    )
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
    names = {f"#h{i}": attr for i, attr in enumerate(held)}
    for i, amount in enumerate(held.values()):
        values[f":h{i}"] = n(amount)
    if ceiling is not None:
        _ceiling_parts(ceiling, checked, names, values)
    if names:
        params["ExpressionAttributeNames"] = names
    return params


@dataclass(frozen=True, slots=True)
class Fill:
    """What proves a bucket full now, whatever writes landed since the image it was
    computed from: `rf <= refilled_by` (at least a set refill since), each limit's `tk >=
    least` (so that refill reaches the room), its held counts no larger than the image's
    (a larger one would leave less room than `tokens` assumes) and `shard_count <=
    shard_count`. Then `tokens` (the room as the image had it, less the take and
    `hold_milli`) is what an exact refill-and-take leaves, or less."""

    refilled_by: int
    shard_count: int
    epoch: int
    least: Mapping[str, int]
    tokens: Mapping[str, int]
    held: Mapping[str, int]
    held_before: Mapping[str, int]
    hold_milli: Mapping[str, int]


def speculative_fill(
    table: str,
    bucket_item_key: Item,
    consume_milli: Mapping[str, int],
    configs: Mapping[str, LimitState],
    fill: Fill,
    *,
    now_ms: int,
    reset_window: bool = False,
) -> dict[str, Any]:
    """A take from a bucket the client's image shows full: one UpdateItem that writes the
    refill (`rf = now`, each limit's tokens SET) under the condition that proves it full.
    Concurrent takes never break that proof while they come further apart than the
    refill of one take: the speculative write of a bucket that stays full."""
    sets, adds, values = window_parts(reset_window, now_ms)
    names = {"#rf": A_REFILL, "#sc": A_SHARD_COUNT}
    sets.append("#rf = :now")
    values[":now"] = n(now_ms)
    conds = ["#rf <= :rby", "(attribute_not_exists(#sc) OR #sc <= :scmax)"]
    values[":rby"] = n(fill.refilled_by)
    values[":scmax"] = n(fill.shard_count)
    values.update(_config_values(tuple(configs.values())))
    held = held_deltas(fill.hold_milli, fill.epoch)
    for i, (attr, amount) in enumerate(held.items()):
        names[f"#h{i}"] = attr
        values[f":h{i}"] = n(amount)
        adds.append(f"#h{i} :h{i}")
    for i, name in enumerate(configs):
        tk = limit_attr(name, "tk")
        sets.append(f"{tk} = :v{i}")
        values[f":v{i}"] = n(fill.tokens[name])
        if consume_milli.get(name):
            adds.append(f"{limit_attr(name, 'tc')} :p{i}")
            values[f":p{i}"] = n(consume_milli[name])
        conds.append(f"{tk} >= :l{i}")
        values[f":l{i}"] = n(fill.least[name])
        for field, value in (("cp", ":cp"), ("ra", ":ra"), ("rp", ":rp")):
            conds.append(f"{limit_attr(name, field)} = {value}{i}")
        for tag, epoch, bound in (
            ("q", fill.epoch, fill.held),
            ("o", fill.epoch - 1, fill.held_before),
        ):
            names[f"#{tag}{i}"] = reserve_attr(name, epoch)
            conds.append(f"(attribute_not_exists(#{tag}{i}) OR #{tag}{i} <= :{tag}{i})")
            values[f":{tag}{i}"] = n(bound.get(name, 0))
    update = "SET " + ", ".join(sets) + (" ADD " + ", ".join(adds) if adds else "")
    return _conditional(table, bucket_item_key, update, " AND ".join(conds), names, values)


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
    full_milli: Mapping[str, tuple[int, int]] | None = None,
    ceiling_milli: Mapping[str, int] | None = None,
    held_bound: Mapping[str, int] | None = None,
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

    Exactness at the top of the bucket: a limit whose refill fills the shard is SET to
    its value (`full_milli`: tokens, and the least `tk` for which the refill fills it,
    checked); a limit changed by ADD checks the refill it adds (or leaves) does not clamp
    (`ceiling_milli`: the most `tk`); `held_bound` bounds each held count the room was
    computed with (a larger one would leave less room).
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
        if ceiling_milli and name in ceiling_milli:
            conds.append(f"{limit_attr(name, 'tk')} <= :k{i}")
            values[f":k{i}"] = n(ceiling_milli[name])
    for i, (name, (tokens, least)) in enumerate((full_milli or {}).items()):
        sets.append(f"{limit_attr(name, 'tk')} = :ftk{i}")
        conds.append(f"{limit_attr(name, 'tk')} >= :fl{i}")
        values[f":ftk{i}"] = n(tokens)
        values[f":fl{i}"] = n(least)
        if consumed_milli.get(name):
            adds.append(f"{limit_attr(name, 'tc')} :ft{i}")
            values[f":ft{i}"] = n(consumed_milli[name])
    for i, (attr, most) in enumerate((held_bound or {}).items()):
        names[f"#b{i}"] = attr
        conds.append(f"(attribute_not_exists(#b{i}) OR #b{i} <= :b{i})")
        values[f":b{i}"] = n(most)
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
    return _conditional(table, bucket_item_key, update, " AND ".join(conds), names, values)


def _conditional(
    table: str, key: Item, update: str, condition: str, names: dict[str, str], values: Item
) -> dict[str, Any]:
    """A conditional UpdateItem that returns the item either way (ALL_NEW when it was
    applied, ALL_OLD when the condition failed): a retry never needs to read."""
    return {
        "TableName": table,
        "Key": key,
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
