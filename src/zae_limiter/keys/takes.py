"""The conditional writes that move a bucket's full-at times (see bucket.py).

Per limit a write takes one form, picked by the client from its last image of the item:
- ADD: the bucket is short of full. `ADD fa :a` under `fa > now*ra` (still short of full,
  so the stored value is the base) and, for a take, `fa <= bound` (the tokens cover it).
- SET: the bucket is full. `SET fa = now*ra + n*unit` under `fa <= now*ra` (or absent);
  the client checked that the room covers the take.
- CHECK: nothing taken from this limit, but it must not be in debt: `fa <= bound`.
- GIVE: tokens back, `ADD fa -amount` with no bound (past full, the formula clamps);
  for a quota, under `now*ra < fa <= bound`: the window the tokens were taken in is
  still the stored one (else they went with it: a give-back never crosses a reset).
- REBASE: the stored config (or a schema-v2 `tk`) differs: SET the config and a full-at
  time computed from the tokens read, under exactly the values read.
Held counts (token reserves) enter by value: a bounded form also requires each live
epoch's count to be at most what the client's image showed, so a reserve taken meanwhile
fails the write and its ALL_OLD shows the count. Both ADD and SET commute with
concurrent writers of either form; a failed condition's ALL_OLD says which form is right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from zae_limiter.keys.buckets import A_WINDOW_WRITES, snapshot_parts, window_parts
from zae_limiter.keys.core import A_REFILL, A_SHARD_COUNT, PK, Item, limit_attr, n
from zae_limiter.keys.reserves import reserve_attr

ADD, SET, CHECK, REBASE, GIVE = "add", "set", "check", "rebase", "give"


@dataclass(frozen=True, slots=True)
class LimitWrite:
    """What one write does to one limit, and what must hold for it to be right."""

    name: str
    form: str
    #: `now_ms * ra`: the full-at value of a bucket that is full right now.
    now_ra: int
    #: ADD: added to `fa`; SET and REBASE: the new `fa`.
    amount: int = 0
    #: `fa` must stay at most this (ADD, CHECK); None: the write must not fail for want
    #: of tokens (a flush or a charge of usage that already happened).
    bound: int | None = None
    #: Added to the usage counter `tc`.
    consumed: int = 0
    #: (epoch, held count the client knows) for the live epochs; bounded forms only.
    held: tuple[tuple[int, int], ...] = ()
    #: The config to write or to find: (capacity, refill amount, refill period).
    config: tuple[int, int, int] = (0, 0, 0)
    #: REBASE: the stored values read (`fa`, config, v2 `tk`; None where absent).
    old_full_at: int | None = None
    old_config: tuple[int, int, int] | None = None
    old_tokens: int | None = None


def _shape(write: LimitWrite) -> tuple[Any, ...]:
    return (
        write.form,
        write.bound is not None,
        len(write.held),
        write.consumed != 0,
        write.old_full_at is None,
        write.old_config is None,
        write.old_tokens is not None,
    )


def _never_taken(i: int) -> str:
    # A schema-v2 item has no `fa` either, but its `tk` says how far from full it is.
    return f"(attribute_not_exists(#f{i}) AND attribute_not_exists(#k{i}))"


@lru_cache(maxsize=1024)
def _limit_parts(i: int, shape: tuple[Any, ...]) -> tuple[list[str], list[str], list[str]]:
    """(SET parts, ADD parts, conditions) of limit `i` (attribute names are `#f{i}` ...)."""
    form, bounded, held, consumed, old_fa_absent, old_cfg_absent, legacy = shape
    sets: list[str] = []
    adds: list[str] = [f"#u{i} :t{i}"] if consumed else []
    conds: list[str] = []
    config = f"#c{i} = :cp{i} AND #a{i} = :ra{i} AND #p{i} = :rp{i}"
    if form == ADD:
        adds.append(f"#f{i} :v{i}")
        conds.append(f"#f{i} > :n{i}")
        if bounded:
            conds.append(f"#f{i} <= :b{i}")
        conds.append(config)
    elif form == SET:
        sets.append(f"#f{i} = :v{i}")
        conds.append(f"({_never_taken(i)} OR #f{i} <= :n{i})")
        conds.append(config)
    elif form == GIVE:
        # A give-back moves the full-at time back; past now it only says "full". A v2
        # item must be converted first (its `tk` is the truth there).
        adds.append(f"#f{i} :v{i}")
        conds.append(f"attribute_not_exists(#k{i})")
        if bounded:
            conds.append(f"#f{i} > :n{i} AND #f{i} <= :b{i}")
    elif form == CHECK:
        conds.append(f"({_never_taken(i)} OR #f{i} <= :b{i})")
        conds.append(config)
    else:
        sets.extend([f"#f{i} = :v{i}", f"#c{i} = :cp{i}", f"#a{i} = :ra{i}", f"#p{i} = :rp{i}"])
        conds.append(f"attribute_not_exists(#f{i})" if old_fa_absent else f"#f{i} = :of{i}")
        if old_cfg_absent:
            conds.append(f"attribute_not_exists(#c{i})")
        else:
            conds.append(f"#c{i} = :ocp{i} AND #a{i} = :ora{i} AND #p{i} = :orp{i}")
        if legacy:
            conds.append(f"#k{i} = :ok{i}")
    for j in range(held):
        conds.append(f"(attribute_not_exists(#h{i}_{j}) OR #h{i}_{j} <= :h{i}_{j})")
    return sets, adds, conds


@lru_cache(maxsize=1024)
def _expression(
    shapes: tuple[tuple[Any, ...], ...],
    reset_window: bool,
    held_exact: tuple[bool, ...],
    removes: int,
    legacy_rf: bool,
) -> tuple[str, str]:
    sets, adds = window_parts(reset_window)
    conds = ["#sc = :sc"]
    for i, shape in enumerate(shapes):
        s_, a_, c_ = _limit_parts(i, shape)
        sets.extend(s_)
        adds.extend(a_)
        conds.extend(c_)
    adds.extend(f"#r{j} :r{j}" for j in range(len(held_exact)))
    conds.extend(f"#r{j} = :q{j}" for j, exact in enumerate(held_exact) if exact)
    if legacy_rf:
        conds.append("#rf = :orf")
    parts = []
    if sets:
        parts.append("SET " + ", ".join(sets))
    parts.append("ADD " + ", ".join(adds))
    removed = [f"#x{j}" for j in range(removes)]
    if legacy_rf:
        removed.append("#rf")
    removed.extend(f"#k{i}" for i, shape in enumerate(shapes) if shape[6])
    if removed:
        parts.append("REMOVE " + ", ".join(removed))
    return " ".join(parts), " AND ".join(conds)


def _limit_names(i: int, write: LimitWrite, names: dict[str, str]) -> None:
    legacy = write.old_tokens is not None or write.form in (SET, CHECK, GIVE)
    epochs = tuple(epoch for epoch, _known in write.held)
    names.update(_names(i, write.name, write.form == GIVE, write.consumed != 0, legacy, epochs))


@lru_cache(maxsize=1024)
def _names(
    i: int, name: str, give: bool, consumed: bool, legacy: bool, epochs: tuple[int, ...]
) -> dict[str, str]:
    # The same few shapes recur on every write of a limit (the epochs change every 20 s).
    names = {f"#f{i}": limit_attr(name, "fa")}
    if not give:
        names[f"#c{i}"] = limit_attr(name, "cp")
        names[f"#a{i}"] = limit_attr(name, "ra")
        names[f"#p{i}"] = limit_attr(name, "rp")
    if consumed:
        names[f"#u{i}"] = limit_attr(name, "tc")
    if legacy:
        names[f"#k{i}"] = limit_attr(name, "tk")
    for j, epoch in enumerate(epochs):
        names[f"#h{i}_{j}"] = reserve_attr(name, epoch)
    return names


def _limit_values(i: int, write: LimitWrite, values: Item) -> None:
    if write.form != GIVE:
        values[f":cp{i}"], values[f":ra{i}"], values[f":rp{i}"] = (n(v) for v in write.config)
    if write.form in (ADD, SET) or (write.form == GIVE and write.bound is not None):
        values[f":n{i}"] = n(write.now_ra)
    if write.form != CHECK:
        values[f":v{i}"] = n(write.amount)
    if write.bound is not None and write.form in (ADD, CHECK, GIVE):
        values[f":b{i}"] = n(write.bound)
    if write.consumed:
        values[f":t{i}"] = n(write.consumed)
    for j, (_epoch, known) in enumerate(write.held):
        values[f":h{i}_{j}"] = n(known)
    if write.form == REBASE:
        if write.old_full_at is not None:
            values[f":of{i}"] = n(write.old_full_at)
        if write.old_config is not None:
            old = write.old_config
            values[f":ocp{i}"], values[f":ora{i}"], values[f":orp{i}"] = (n(v) for v in old)
        if write.old_tokens is not None:
            values[f":ok{i}"] = n(write.old_tokens)


def take_write(
    table: str,
    bucket_item_key: Item,
    writes: Sequence[LimitWrite],
    *,
    shard_count: int,
    now_ms: int,
    reset_window: bool = False,
    held_adds: Mapping[str, int] | None = None,
    held_exact: Mapping[str, int] | None = None,
    remove: Sequence[str] = (),
    legacy_rf: int | None = None,
    writes_counted: int = 1,
) -> dict[str, Any]:
    """One conditional UpdateItem: every limit's form, the held counts a reserve moves
    (`held_adds`: attribute -> millitokens), stale held counts to drop (`remove`), and
    the item's shard count, on which every amount depends. `held_exact`: held counts
    (among `held_adds`) that must be exactly these values. `legacy_rf`: the v2 `rf` read
    (REBASE from `tk`): it must be unchanged, and goes. `writes_counted`: what the write
    adds to the partition's write-rate window, this write and the failed conditional
    writes before it (they took the partition's capacity too, see flows/write/take.py)."""
    held_adds = held_adds or {}
    held_exact = held_exact or {}
    shapes = tuple(_shape(w) for w in writes)
    exact = tuple(attr in held_exact for attr in held_adds)
    update, condition = _expression(shapes, reset_window, exact, len(remove), legacy_rf is not None)
    names: dict[str, str] = {"#sc": A_SHARD_COUNT}
    values: Item = {":wc": n(writes_counted), ":sc": n(shard_count)}
    if reset_window:
        values[":ws"], values[":wz"] = n(now_ms), n(0)
    for i, write in enumerate(writes):
        _limit_names(i, write, names)
        _limit_values(i, write, values)
    for j, (attr, milli) in enumerate(held_adds.items()):
        names[f"#r{j}"] = attr
        values[f":r{j}"] = n(milli)
        if attr in held_exact:
            values[f":q{j}"] = n(held_exact[attr])
    names.update({f"#x{j}": attr for j, attr in enumerate(remove)})
    if legacy_rf is not None:
        names["#rf"] = A_REFILL
        values[":orf"] = n(legacy_rf)
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


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
            names[f"#f{i}"] = limit_attr(name, "fa")
            values[f":f{i}"] = n(-amount)
            adds.append(f"#f{i} :f{i}")
    for i, (name, milli) in enumerate(consumed.items()):
        if milli:
            names[f"#u{i}"] = limit_attr(name, "tc")
            values[f":u{i}"] = n(milli)
            adds.append(f"#u{i} :u{i}")
    for j, (attr, milli) in enumerate((held_adds or {}).items()):
        if milli:
            names[f"#r{j}"] = attr
            values[f":r{j}"] = n(milli)
            adds.append(f"#r{j} :r{j}")
    if not adds:
        # nothing to move: still a valid request that only checks the item exists
        names["#wn"] = A_WINDOW_WRITES
        values[":zero"] = n(0)
        adds.append("#wn :zero")
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
) -> dict[str, Any]:
    """A donor shard's split: SET its count under the count it had, and snapshot its
    `limits`' full-at values (`snapshot_parts`). Its full-at times stay: at the higher
    count the same times mean a smaller share, and the new shard copies the snapshot, so
    the two together hold what the donor held."""
    sets, names, values = snapshot_parts(limits)
    return {
        "TableName": table,
        "Key": bucket_item_key,
        "UpdateExpression": "SET " + ", ".join(["#sc = :new", *sets]),
        "ConditionExpression": "attribute_exists(#pk) AND #sc = :old",
        "ExpressionAttributeNames": {"#pk": PK, "#sc": A_SHARD_COUNT, **names},
        "ExpressionAttributeValues": {":new": n(new_count), ":old": n(old_count), **values},
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


__all__ = [
    "ADD",
    "CHECK",
    "GIVE",
    "REBASE",
    "SET",
    "LimitWrite",
    "give_back_write",
    "set_shard_count",
    "take_write",
]
