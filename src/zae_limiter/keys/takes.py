"""The conditional writes that move a bucket's full-at times (see bucket.py).

Per limit a write takes one form, picked by the client from its last image of the item
(`now` below is `now_ms * ra`, the full-at value of a bucket full right now):
- ADD: the bucket is short of full. `ADD full_at :delta` under `full_at > now` (still
  short of full, so the stored value is the base) and, for a take, `full_at <= bound`
  (the tokens cover it).
- SET: the bucket is full. `SET full_at = now + n*unit` under `full_at <= now` (or
  absent); the client checked that the room covers the take.
- CHECK: nothing taken from this limit, but it must not be in debt: `full_at <= bound`.
- GIVE: tokens back, `ADD full_at -amount` with no bound (past full, the formula clamps);
  for a quota, under `now < full_at <= bound`: the window the tokens were taken in is
  still the stored one (else they went with it: a give-back never crosses a reset).
- REBASE: the stored config (or a schema-v2 `tk`) differs: SET the config and a full-at
  time computed from the tokens read, under exactly the values read; and the split
  snapshot (`sf`) the item holds, brought to the new config (a full-at value is in its
  config's units: flows/write/shares.py `rebased_split`).
Held counts (token reserves) enter by value: a bounded form also requires each live
epoch's count to be at most what the client's image showed, so a reserve taken meanwhile
fails the write and its ALL_OLD shows the count. Both ADD and SET commute with
concurrent writers of either form; a failed condition's ALL_OLD says which form is right.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from zae_limiter.keys.buckets import (
    A_PREV_WINDOW_START,
    A_PREV_WINDOW_WRITES,
    A_WINDOW_START,
    A_WINDOW_WRITES,
    snapshot_parts,
    window_parts,
)
from zae_limiter.keys.core import A_REFILL, A_SHARD_COUNT, PK, TTL, Item, limit_attr, n
from zae_limiter.keys.expiry import EXPIRY_NAME, EXPIRY_VALUE, expiry_update
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
    #: REBASE of an item with a split snapshot: the snapshot to write, and the one read.
    split: int | None = None
    old_split: int | None = None


def _shape(write: LimitWrite) -> tuple[Any, ...]:
    return (
        write.form,
        write.bound is not None,
        len(write.held),
        write.consumed != 0,
        write.old_full_at is None,
        write.old_config is None,
        write.old_tokens is not None,
        write.split is not None,
    )


# One limit's named parts. The expressions below are written with these placeholders;
# `_numbered` gives each limit of a write its own (`#full_at` -> `#full_at_0`), and the
# names and values a request carries are exactly the placeholders its expressions use.
# Stored names stay short (every byte is billed); placeholders are short words.

#: Placeholder -> the stored field it names (`b_{limit}_{field}`, keys/core.py).
_LIMIT_ATTRIBUTES: dict[str, str] = {
    "#full_at": "fa",
    "#cap": "cp",
    "#refill": "ra",
    "#period": "rp",
    "#used": "tc",
    "#tokens": "tk",  # schema v2: tokens as of the last refill
    "#split": "sf",  # the split snapshot (keys/buckets.py `snapshot_parts`)
}
#: `#held{j}`: the held count of the j-th live epoch the write knows (`b_{limit}_rs{epoch}`).
_HELD = "#held"

_NO_CONFIG: tuple[int, int, int] = (0, 0, 0)
#: Where a value comes from in a LimitWrite: (its field, and the position in it when the
#: field is a tuple). Read by `_limit_values` without a function per placeholder: this
#: runs for every number of every write.
_Carried = tuple[str, int | None]
#: Placeholder -> the number it carries, from the limit's write. `:x` is the client's
#: value of `#x`; `:was_x` the value it read.
_LIMIT_VALUES: dict[str, _Carried] = {
    ":now": ("now_ra", None),  # the full-at value of a bucket full right now
    ":delta": ("amount", None),  # ADD: how far the full-at time moves
    ":full_at": ("amount", None),  # SET, REBASE: the new full-at time
    ":bound": ("bound", None),
    ":used": ("consumed", None),
    ":cap": ("config", 0),
    ":refill": ("config", 1),
    ":period": ("config", 2),
    ":was_full_at": ("old_full_at", None),
    ":was_cap": ("old_config", 0),
    ":was_refill": ("old_config", 1),
    ":was_period": ("old_config", 2),
    ":was_tokens": ("old_tokens", None),
    ":split": ("split", None),  # REBASE: the split snapshot in the new config
    ":was_split": ("old_split", None),
}
#: `:held{j}`: the count the client knows for `#held{j}`.
_KNOWN_HELD = ":held"

_CONFIG_UNCHANGED = "#cap = :cap AND #refill = :refill AND #period = :period"
_CONFIG_AS_READ = "#cap = :was_cap AND #refill = :was_refill AND #period = :was_period"
# A schema-v2 item has no full-at time either, but its `tk` says how far from full it is.
_NEVER_TAKEN = "(attribute_not_exists(#full_at) AND attribute_not_exists(#tokens))"


def _form_parts(shape: tuple[Any, ...]) -> tuple[list[str], list[str], list[str]]:
    """(SET parts, ADD parts, conditions) of one limit, in unnumbered placeholders."""
    form, bounded, held, consumed, old_fa_absent, old_cfg_absent, legacy, split = shape
    sets: list[str] = []
    adds: list[str] = ["#used :used"] if consumed else []
    conds: list[str] = []
    if form == ADD:
        adds.append("#full_at :delta")
        conds.append("#full_at > :now")  # short of full: the stored value is the base
        if bounded:
            conds.append("#full_at <= :bound")
        conds.append(_CONFIG_UNCHANGED)
    elif form == SET:
        sets.append("#full_at = :full_at")
        conds.append(f"({_NEVER_TAKEN} OR #full_at <= :now)")
        conds.append(_CONFIG_UNCHANGED)
    elif form == GIVE:
        # A give-back moves the full-at time back; past now it only says "full". A v2
        # item must be converted first (its `tk` is the truth there).
        adds.append("#full_at :delta")
        conds.append("attribute_not_exists(#tokens)")
        if bounded:
            conds.append("#full_at > :now AND #full_at <= :bound")
    elif form == CHECK:
        conds.append(f"({_NEVER_TAKEN} OR #full_at <= :bound)")
        conds.append(_CONFIG_UNCHANGED)
    else:
        sets.append("#full_at = :full_at")
        sets.extend(_CONFIG_UNCHANGED.split(" AND "))
        read = "#full_at = :was_full_at"
        conds.append("attribute_not_exists(#full_at)" if old_fa_absent else read)
        conds.append("attribute_not_exists(#cap)" if old_cfg_absent else _CONFIG_AS_READ)
        if legacy:
            conds.append("#tokens = :was_tokens")
        if split:
            sets.append("#split = :split")
            conds.append("#split = :was_split")
    for j in range(held):
        conds.append(f"(attribute_not_exists({_HELD}{j}) OR {_HELD}{j} <= {_KNOWN_HELD}{j})")
    return sets, adds, conds


_PLACEHOLDER = re.compile(r"([#:][a-z_]+\d*)")


def _numbered(parts: list[str], i: int) -> list[str]:
    return [_PLACEHOLDER.sub(rf"\1_{i}", part) for part in parts]


@dataclass(frozen=True, slots=True)
class _LimitParts:
    sets: tuple[str, ...]
    adds: tuple[str, ...]
    conds: tuple[str, ...]
    #: (numbered placeholder, unnumbered one) of every name the parts use.
    names: tuple[tuple[str, str], ...]
    #: (numbered placeholder, where its number is) of every value the parts use.
    values: tuple[tuple[str, _Carried], ...]


def _carried(plain: str) -> _Carried:
    if plain.startswith(_KNOWN_HELD):
        return ("held", int(plain[len(_KNOWN_HELD) :]))  # (epoch, count): the count
    return _LIMIT_VALUES[plain]


@lru_cache(maxsize=1024)
def _limit_parts(i: int, shape: tuple[Any, ...]) -> _LimitParts:
    plain = _form_parts(shape)
    sets, adds, conds = (tuple(_numbered(part, i)) for part in plain)
    used = dict.fromkeys(_PLACEHOLDER.findall(" ".join(part for parts in plain for part in parts)))
    pairs = tuple((f"{p}_{i}", p) for p in used)
    return _LimitParts(
        sets,
        adds,
        conds,
        tuple(pair for pair in pairs if pair[0][0] == "#"),
        tuple((numbered, _carried(plain)) for numbered, plain in pairs if plain[0] == ":"),
    )


@lru_cache(maxsize=1024)
def _expression(
    shapes: tuple[tuple[Any, ...], ...],
    reset_window: bool,
    held_exact: tuple[bool, ...],
    removes: int,
    legacy_rf: bool,
    expiry: bool | None = None,
) -> tuple[str, str]:
    sets, adds = window_parts(reset_window)
    conds = ["#shards = :shards"]
    for i, shape in enumerate(shapes):
        parts = _limit_parts(i, shape)
        sets.extend(parts.sets)
        adds.extend(parts.adds)
        conds.extend(parts.conds)
    adds.extend(f"#reserve{j} :reserve{j}" for j in range(len(held_exact)))
    conds.extend(f"#reserve{j} = :was_reserve{j}" for j, exact in enumerate(held_exact) if exact)
    if legacy_rf:
        conds.append("#refilled = :was_refilled")
    out = []
    if sets:
        out.append("SET " + ", ".join(sets))
    out.append("ADD " + ", ".join(adds))
    removed = [f"#stale{j}" for j in range(removes)]
    if legacy_rf:
        removed.append("#refilled")
    removed.extend(f"#tokens_{i}" for i, shape in enumerate(shapes) if shape[6])
    if removed:
        out.append("REMOVE " + ", ".join(removed))
    update = " ".join(out)
    if expiry is not None:  # True: the write SETs a `ttl`; False: it REMOVEs it
        update = expiry_update(update, remove=not expiry)
    return update, " AND ".join(conds)


@lru_cache(maxsize=1024)
def _names(parts: _LimitParts, name: str, epochs: tuple[int, ...]) -> dict[str, str]:
    # The same few shapes recur on every write of a limit (the epochs change every 20 s).
    names = {}
    for placeholder, plain in parts.names:
        if plain.startswith(_HELD):
            names[placeholder] = reserve_attr(name, epochs[int(plain[len(_HELD) :])])
        else:
            names[placeholder] = limit_attr(name, _LIMIT_ATTRIBUTES[plain])
    return names


def _limit_values(parts: _LimitParts, write: LimitWrite, values: Item) -> None:
    for placeholder, (name, at) in parts.values:
        value = getattr(write, name)
        if at is not None:
            # A config read may be absent (zeros); a held count is (epoch, count).
            value = value[at][1] if name == "held" else (value or _NO_CONFIG)[at]
        # Never None: a placeholder is used only where its write has the number.
        values[placeholder] = {"N": str(value)}


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
    expiry: tuple[int | None] | None = None,
) -> dict[str, Any]:
    """One conditional UpdateItem: every limit's form, the held counts a reserve moves
    (`held_adds`: attribute -> millitokens), stale held counts to drop (`remove`), and
    the item's shard count, on which every amount depends. `held_exact`: held counts
    (among `held_adds`) that must be exactly these values. `legacy_rf`: the v2 `rf` read
    (REBASE from `tk`): it must be unchanged, and goes. `writes_counted`: what the write
    adds to the partition's write-rate window, this write and the failed conditional
    writes before it (they took the partition's capacity too, see flows/write/take.py).
    `expiry`: (the item's new `ttl` in epoch seconds, or None to remove it); none: the
    write leaves `ttl` alone (keys/expiry.py; the same part `with_expiry` adds)."""
    held_adds = held_adds or {}
    held_exact = held_exact or {}
    # Loops, not comprehensions: each of those is a call of its own, on every write.
    listed = []
    for w in writes:
        listed.append(_shape(w))
    shapes = tuple(listed)
    exact: tuple[bool, ...] = ()
    if held_adds:
        exact = tuple(attr in held_exact for attr in held_adds)
    ttl = None if expiry is None else expiry[0] is not None
    update, condition = _expression(
        shapes, reset_window, exact, len(remove), legacy_rf is not None, ttl
    )
    names: dict[str, str] = {"#shards": A_SHARD_COUNT}
    values: Item = {":writes": {"N": str(writes_counted)}, ":shards": {"N": str(shard_count)}}
    if reset_window:
        values[":now_ms"], values[":zero"] = n(now_ms), n(0)
    for i, (write, shape) in enumerate(zip(writes, shapes, strict=True)):
        parts = _limit_parts(i, shape)
        epochs = []
        for epoch, _count in write.held:
            epochs.append(epoch)
        names.update(_names(parts, write.name, tuple(epochs)))
        _limit_values(parts, write, values)
    for j, (attr, milli) in enumerate(held_adds.items()):
        names[f"#reserve{j}"] = attr
        values[f":reserve{j}"] = n(milli)
        if attr in held_exact:
            values[f":was_reserve{j}"] = n(held_exact[attr])
    for j, attr in enumerate(remove):
        names[f"#stale{j}"] = attr
    if legacy_rf is not None:
        names["#refilled"] = A_REFILL
        values[":was_refilled"] = n(legacy_rf)
    if expiry is not None:  # the names `expiry_update` put in the expression
        names[EXPIRY_NAME] = TTL
        if expiry[0] is not None:
            values[EXPIRY_VALUE] = {"N": str(expiry[0])}
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
            names[f"#full_at_{i}"] = limit_attr(name, _LIMIT_ATTRIBUTES["#full_at"])
            values[f":delta_{i}"] = n(-amount)
            adds.append(f"#full_at_{i} :delta_{i}")
    for i, (name, milli) in enumerate(consumed.items()):
        if milli:
            names[f"#used_{i}"] = limit_attr(name, _LIMIT_ATTRIBUTES["#used"])
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


__all__ = [
    "ADD",
    "CHECK",
    "GIVE",
    "REBASE",
    "SET",
    "LimitWrite",
    "give_back_write",
    "held_adds_of",
    "set_shard_count",
    "take_write",
]
