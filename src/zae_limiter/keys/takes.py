"""An acquire's conditional write that moves a bucket's full-at times (see bucket.py),
and the item it reads back (`decode_bucket`, `written_facts`).

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

from zae_limiter.bucket import LimitState
from zae_limiter.keys.buckets import (
    A_QUOTA_RESET,
    A_WCU_LIMIT,
    A_WINDOW_START,
    A_WINDOW_WRITES,
    window_parts,
)
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
    TTL,
    Item,
    get_n,
    limit_attr,
    n,
)
from zae_limiter.keys.entities import A_BYPASS
from zae_limiter.keys.expiry import EXPIRY_NAME, EXPIRY_VALUE, expiry_update
from zae_limiter.keys.reserves import held_epoch, reserve_attr
from zae_limiter.limits import RESERVED_LIMIT_NAMES
from zae_limiter.models import BucketState
from zae_limiter.quota import Window, window_of

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


# ---------------------------------------------------------------- the item read back
def _limit_numbers(
    item: Mapping[str, Any],
) -> tuple[dict[str, dict[str, int]], dict[str, dict[int, int]]]:
    """(limit -> stored field -> number, limit -> epoch -> held count): one pass over the
    item, since this runs once per acquire (decode_reserved is the held counts alone)."""
    fields: dict[str, dict[str, int]] = {}
    reserved: dict[str, dict[int, int]] = {}
    skip = len(BUCKET_PREFIX)
    for attr, value in item.items():
        if not attr.startswith(BUCKET_PREFIX):
            continue
        number = value.get("N")
        if number is None:
            continue
        name, _, field = attr[skip:].rpartition("_")
        if not name:
            continue
        if field in FIELDS:
            if name not in RESERVED_LIMIT_NAMES:
                fields.setdefault(name, {})[field] = int(number)
        elif (epoch := held_epoch(field)) is not None:
            reserved.setdefault(name, {})[epoch] = int(number)
    return fields, reserved


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


__all__ = [
    "ADD",
    "CHECK",
    "GIVE",
    "QUOTA_PERIOD_BELOW",
    "REBASE",
    "SET",
    "LimitWrite",
    "decode_bucket",
    "partition_wcu",
    "take_write",
    "written_facts",
]
