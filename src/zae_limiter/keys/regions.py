"""Regional shares of a global limit: the share item of each region, and its writes.

One item per (entity, resource, limit, region), all under one partition key so that one
Query reads every region's item from the local replica:

    PK  {ns}/GSHARE#{entity}#{resource}#{limit}
    SK  #REGION#{region}

Only the clients and the share keeper of `region` ever write its item, so last-writer-wins
replication never has two writers to choose between. The item is the region's bucket
(the share's capacity and rate, `fa` as in docs/buckets.md) and the region's side of the
transfer protocol (docs/global.md):

| attribute | meaning |
|---|---|
| `pt` | parts of the whole limit this region holds (of `PARTS`) |
| `vr` | share version: raised by every change of `pt`; every take is conditioned on it |
| `cp` `ra` `rp` | the share's capacity and refill (millitokens, ms), derived from `pt` |
| `wc` `wr` `wp` | the whole limit's capacity and refill the parts are of |
| `fa` | full-at time x `ra` (bucket.py), `tc` millitokens consumed |
| `dm` | millitokens offered in this region, ever (demand; admitted or not) |
| `he` `hc` `hp` | reserves: epoch of `hc`; millitokens taken into reserves in it, and before |
| `fz` | set while a transfer is written: when its keeper froze the item |
| `g_{region}` | parts this region has ever given to that region (written by the giver) |
| `k_{region}` | parts this region has ever taken in from that region (its acknowledgement) |
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zae_limiter.keys.core import Item, key, n, s

#: The whole limit is split into this many parts; a share is a number of parts.
PARTS = 1_000_000


class ShareAttr:
    """A share item's key prefixes and attribute names (the table above)."""

    SHARE_PREFIX = "GSHARE#"
    REGION_SK_PREFIX = "#REGION#"
    PARTS_HELD, VERSION = "pt", "vr"
    CAPACITY, RATE, PERIOD = "cp", "ra", "rp"
    WHOLE_CAPACITY, WHOLE_RATE, WHOLE_PERIOD = "wc", "wr", "wp"
    FULL_AT, CONSUMED, DEMAND = "fa", "tc", "dm"
    REGION = "region"
    HELD_EPOCH, HELD, HELD_BEFORE = "he", "hc", "hp"
    GIVEN_PREFIX, TAKEN_PREFIX = "g_", "k_"
    FROZEN = "fz"


#: A reserve epoch (ms): held counts roll into the full-at time an epoch or two after,
#: so it must outlast a reserve's life (flows/regional_run.RESERVE_LIFE_MS). Held counts
#: keep up to two epochs of takes out of the share's room: at 500 ms a busy region's
#: reserves filled the whole room (capacity = 1 s of rate) and its refill stopped.
HELD_EPOCH_MS = 250


def share_pk(ns: str, entity_id: str, resource: str, limit_name: str) -> str:
    return f"{ns}/{ShareAttr.SHARE_PREFIX}{entity_id}#{resource}#{limit_name}"


def share_key(ns: str, entity_id: str, resource: str, limit_name: str, region: str) -> Item:
    return key(
        share_pk(ns, entity_id, resource, limit_name), f"{ShareAttr.REGION_SK_PREFIX}{region}"
    )


def is_share_key(pk: str, sk: str) -> bool:
    return sk.startswith(ShareAttr.REGION_SK_PREFIX) and f"/{ShareAttr.SHARE_PREFIX}" in pk


def parse_share_pk(pk: str) -> tuple[str, str, str, str]:
    """(namespace, entity, resource, limit) of a share item's PK; ValueError if it is not
    one (ids, resources and limit names hold no `#`: keys.validate_*)."""
    ns, sep, rest = pk.partition(f"/{ShareAttr.SHARE_PREFIX}")
    parts = rest.split("#")
    if not sep or not ns or len(parts) != 3 or not all(parts):
        raise ValueError(f"not a share item key: {pk!r}")
    return ns, parts[0], parts[1], parts[2]


#: Usage snapshots fence each counted item on its stream sequence numbers under an integer
#: (a bucket's shard id, under 100); a share item's is this plus a checksum of its limit
#: and region, so the two never meet.
SHARE_FENCE_BASE = 1_000_000


def share_fence_id(limit_name: str, region: str) -> int:
    return SHARE_FENCE_BASE + zlib.crc32(f"{limit_name}#{region}".encode())


def given_attr(region: str) -> str:
    return f"{ShareAttr.GIVEN_PREFIX}{region}"


def taken_attr(region: str) -> str:
    return f"{ShareAttr.TAKEN_PREFIX}{region}"


def share_counters(item: Mapping[str, Any], prefix: str) -> dict[str, int]:
    """`g_*` or `k_*` counters of an item: region -> parts."""
    return {
        attr[len(prefix) :]: int(value["N"])
        for attr, value in item.items()
        if attr.startswith(prefix) and "N" in value
    }


def share_region(item: Mapping[str, Any]) -> str:
    sk = str(item["SK"]["S"])
    return sk[len(ShareAttr.REGION_SK_PREFIX) :]


def all_regions_query(
    table: str, ns: str, entity_id: str, resource: str, name: str
) -> dict[str, Any]:
    """Every region's share item, as the local replica holds them."""
    return {
        "TableName": table,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": s(share_pk(ns, entity_id, resource, name))},
        "ConsistentRead": True,
    }


def _returns() -> dict[str, str]:
    return {"ReturnValues": "ALL_NEW", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


@dataclass(frozen=True, slots=True)
class Held:
    """Reserves on a share item as a take saw them: `he` (None: never taken), `hc`, `hp`;
    and what the take records: `milli` taken into a reserve in `epoch`. Every held count
    on the item keeps its tokens out of the bucket until a take rolls it into `fa` (as
    spent): a take in a later epoch moves `hc` to `hp` and drops the old `hp` (or both,
    after two epochs), and the caller adds what it drops to the full-at time. The take is
    conditioned on the counts being no higher than seen (its room was reduced by them)."""

    seen_epoch: int | None
    seen_held: int
    seen_before: int
    milli: int
    epoch: int

    @property
    def rolls(self) -> bool:
        """Whether this take writes the counts (it adds to them, or old ones drop)."""
        old = self.seen_epoch is not None and self.seen_epoch != self.epoch
        return self.milli > 0 or (old and (self.seen_held > 0 or self.seen_before > 0))

    @property
    def dropped(self) -> int:
        """Millitokens this take's roll moves from the held counts into `fa`."""
        if not self.rolls or self.seen_epoch is None or self.seen_epoch == self.epoch:
            return 0
        if self.seen_epoch == self.epoch - 1:
            return self.seen_before
        return self.seen_held + self.seen_before


def _held_parts(held: Held, names: dict[str, str], values: dict[str, Any]) -> tuple[str, str, str]:
    """(SET part, ADD part, condition part) for the held counts."""
    names["#he"] = ShareAttr.HELD_EPOCH
    if held.seen_epoch is not None or held.rolls:
        names.update({"#hc": ShareAttr.HELD, "#hp": ShareAttr.HELD_BEFORE})
    if held.seen_epoch is None:
        condition = "attribute_not_exists(#he)"
    else:
        values.update({
            ":hs": n(held.seen_epoch), ":sc": n(held.seen_held), ":sp": n(held.seen_before),
        })  # fmt: skip
        condition = "#he = :hs AND #hc <= :sc AND #hp <= :sp"
    if not held.rolls:
        return "", "", condition
    values[":hm"] = n(held.milli)
    if held.seen_epoch == held.epoch:
        return "", "#hc :hm", condition
    values[":he"] = n(held.epoch)
    if held.seen_epoch == held.epoch - 1:
        return "#he = :he, #hc = :hm, #hp = #hc", "", condition
    values[":z"] = n(0)
    return "#he = :he, #hc = :hm, #hp = :z", "", condition


def share_take_write(
    table: str,
    item_key: Item,
    version: int,
    amount_milli: int,
    full_at: int,
    window: tuple[int, int | None],
    offered_milli: int,
    held: Held | None = None,
) -> dict[str, Any]:
    """A take of `amount_milli` from a region's share, planned at share version `version`.

    `window` is (threshold, upper). With an upper bound, the ADD form: the bucket is short
    of full (`fa > threshold`) and stays in credit (`fa <= upper`); `full_at` is the amount
    added. Without, the SET form: the bucket is full (`fa` absent or `<= threshold`) and
    `fa` is set to `full_at`. `offered_milli`: demand this client counted since its last
    write (rejected acquires included), carried by the take at no extra request. `held`:
    the part of the amount that goes into a reserve, counted for the share keeper.
    """
    threshold, upper = window
    names = {
        "#v": ShareAttr.VERSION,
        "#f": ShareAttr.FULL_AT,
        "#c": ShareAttr.CONSUMED,
        "#d": ShareAttr.DEMAND,
    }
    values = {
        ":v": n(version), ":a": n(amount_milli), ":d": n(offered_milli),
        ":t": n(threshold), ":x": n(full_at),
    }  # fmt: skip
    sets, adds = [], ["#c :a", "#d :d"]
    if upper is not None:
        values[":u"] = n(upper)
        adds.insert(0, "#f :x")
        condition = "#v = :v AND #f > :t AND #f <= :u"
    else:
        sets.append("#f = :x")
        condition = "#v = :v AND (attribute_not_exists(#f) OR #f <= :t)"
    if held is not None:
        held_set, held_add, held_condition = _held_parts(held, names, values)
        sets += [held_set] if held_set else []
        adds += [held_add] if held_add else []
        condition += f" AND {held_condition}"
    update = ("SET " + ", ".join(sets) + " " if sets else "") + "ADD " + ", ".join(adds)
    return {
        "TableName": table,
        "Key": item_key,
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        **_returns(),
    }


def demand_write(table: str, item_key: Item, offered_milli: int) -> dict[str, Any]:
    """Demand seen by a client that made no take since: an ADD to `dm`, only if the item
    exists (the keeper creates it). Never re-sent: an ADD applied twice counts twice."""
    return {
        "TableName": table,
        "Key": item_key,
        "UpdateExpression": "ADD #d :d",
        "ConditionExpression": "attribute_exists(#v)",
        "ExpressionAttributeNames": {"#d": ShareAttr.DEMAND, "#v": ShareAttr.VERSION},
        "ExpressionAttributeValues": {":d": n(offered_milli)},
    }


def create_put(
    table: str, item_key: Item, fields: Mapping[str, int], region: str
) -> dict[str, Any]:
    """A region's share item as first written (by a take or by its keeper)."""
    item: Item = {**item_key, ShareAttr.REGION: s(region), **{a: n(v) for a, v in fields.items()}}
    return {
        "TableName": table,
        "Item": item,
        "ConditionExpression": "attribute_not_exists(#v)",
        "ExpressionAttributeNames": {"#v": ShareAttr.VERSION},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def freeze_write(table: str, item_key: Item, seen_version: int, now_ms: int) -> dict[str, Any]:
    """The first of a transfer's two writes: the next version, marked frozen (`fz`, when).
    Every take planned on the version before fails from now on, and a take never plans
    on a frozen image: the item's bucket stands still until the keeper's second write,
    which therefore reads it exactly (this write's ALL_NEW) without racing the takes."""
    return {
        "TableName": table,
        "Key": item_key,
        "UpdateExpression": "SET #v = :n, #z = :t",
        "ConditionExpression": "#v = :v",
        "ExpressionAttributeNames": {"#v": ShareAttr.VERSION, "#z": ShareAttr.FROZEN},
        "ExpressionAttributeValues": {
            ":v": n(seen_version),
            ":n": n(seen_version + 1),
            ":t": n(now_ms),
        },
        **_returns(),
    }


def reshare_write(
    table: str, item_key: Item, frozen_version: int, fields: Mapping[str, int]
) -> dict[str, Any]:
    """The second write of a transfer: new parts, share config, re-expressed `fa`, raised
    `g_*` / `k_*` counters and the next version, unfrozen, over the frozen image."""
    names = {"#v": ShareAttr.VERSION, "#z": ShareAttr.FROZEN}
    values: dict[str, Any] = {":v": n(frozen_version)}
    sets = []
    for i, (attr, value) in enumerate(sorted(fields.items())):
        names[f"#s{i}"] = attr
        values[f":s{i}"] = n(value)
        sets.append(f"#s{i} = :s{i}")
    return {
        "TableName": table,
        "Key": item_key,
        "UpdateExpression": "SET " + ", ".join(sets) + " REMOVE #z",
        "ConditionExpression": "#v = :v AND attribute_exists(#z)",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        **_returns(),
    }


__all__ = [
    "HELD_EPOCH_MS",
    "PARTS",
    "SHARE_FENCE_BASE",
    "Held",
    "ShareAttr",
    "all_regions_query",
    "create_put",
    "demand_write",
    "freeze_write",
    "given_attr",
    "is_share_key",
    "parse_share_pk",
    "reshare_write",
    "share_counters",
    "share_fence_id",
    "share_key",
    "share_pk",
    "share_region",
    "share_take_write",
    "taken_attr",
]
