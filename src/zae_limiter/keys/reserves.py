"""Token reserves on a bucket item: held counts per epoch, and the write that returns one.

`b_{limit}_rs{epoch}` counts the millitokens that clients took out as reserves during
that epoch and have not returned yet. Readers count the current and the previous epoch
only (`held_milli`): a reserve lives at most one epoch, so an older count can only be
a crashed client's, whose tokens are then lost (spent) and no longer reduce the capacity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zae_limiter.keys.core import BUCKET_PREFIX, limit_attr

#: Length of a reserve epoch (ms). Every reader and writer must agree on it.
RESERVE_EPOCH_MS = 20_000
RESERVE_FIELD = "rs"
#: Every held-count attribute name contains this (a quick test before decoding an item).
RESERVE_MARK = f"_{RESERVE_FIELD}"


def reserve_epoch(now_ms: int) -> int:
    return now_ms // RESERVE_EPOCH_MS


def reserve_attr(name: str, epoch: int) -> str:
    return limit_attr(name, f"{RESERVE_FIELD}{epoch}")


def decode_reserved(item: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """Held counts on an item: limit -> epoch -> millitokens."""
    out: dict[str, dict[int, int]] = {}
    for attr, value in item.items():
        if not attr.startswith(BUCKET_PREFIX) or "N" not in value:
            continue
        name, _, field = attr[len(BUCKET_PREFIX) :].rpartition("_")
        epoch = held_epoch(field)
        if name and epoch is not None:
            out.setdefault(name, {})[epoch] = int(value["N"])
    return out


def held_epoch(field: str) -> int | None:
    """The epoch of a held-count field (`rs{epoch}`), None when `field` is not one."""
    digits = field[len(RESERVE_FIELD) :]
    return int(digits) if field.startswith(RESERVE_FIELD) and digits.isdigit() else None


def held_milli(reserved: Mapping[int, int], now_ms: int) -> int:
    """Millitokens of one limit held in live reserves (this epoch and the one before)."""
    if not reserved:
        return 0  # no reserve ever held from the shard: every write without reserves
    current = reserve_epoch(now_ms)
    return max(0, sum(v for e, v in reserved.items() if current - 1 <= e <= current))


def lost_milli(reserved: Mapping[int, int], now_ms: int) -> int:
    """Millitokens of one limit in expired held counts: reserves whose client never gave
    them back (it crashed). They are spent, never created: readers count them as taken
    until a write moves them into the full-at time (`expired_counts`)."""
    if not reserved:
        return 0
    current = reserve_epoch(now_ms)
    return sum(v for e, v in reserved.items() if e < current - 1 and v > 0)


def expired_counts(name: str, reserved: Mapping[int, int], now_ms: int) -> dict[str, int]:
    """The expired held counts of one limit that a write must charge (attribute -> count)."""
    if not reserved:
        return {}
    current = reserve_epoch(now_ms)
    return {reserve_attr(name, e): v for e, v in reserved.items() if e < current - 1 and v > 0}


@dataclass(frozen=True, slots=True)
class Flush:
    """What a reserve spent since its last write, reported by the next write to its bucket:
    `spent` goes to `tc` (usage) and each epoch's held count drops by `released`, so held
    counts stay close to what reserves really hold, not to all they ever took."""

    spent: Mapping[str, int]
    released: Mapping[int, Mapping[str, int]]
    #: The shard whose held counts these are.
    shard_id: int = 0
    #: Set when the flush gives the whole reserve back (an aged reserve, returned by the
    #: acquire's own write): the unspent tokens that go back with it. `released` is then
    #: every count the reserve raised, and `spent` what it took less these.
    back: Mapping[str, int] | None = None
    #: Limits whose `spent` is usage (`tc`) only, never charged to the full-at time: a
    #: calendar quota whose window ended after the reserve was taken (its spending went
    #: with that window; charged again, the next window would lose it).
    uncharged: frozenset[str] = frozenset()


def held_deltas(hold: Mapping[str, int], epoch: int, flush: Flush | None = None) -> dict[str, int]:
    """ADD amounts per held-count attribute: `hold` taken now, less what `flush` releases
    (one amount per attribute: an update may name an attribute once)."""
    out: dict[str, int] = {}
    for name, milli in hold.items():
        if milli:
            attr = reserve_attr(name, epoch)
            out[attr] = out.get(attr, 0) + milli
    for old_epoch, amounts in (flush.released if flush else {}).items():
        for name, milli in amounts.items():
            if milli:
                attr = reserve_attr(name, old_epoch)
                out[attr] = out.get(attr, 0) - milli
    if not out:
        return out
    return {attr: milli for attr, milli in out.items() if milli}


__all__ = [
    "RESERVE_EPOCH_MS",
    "RESERVE_FIELD",
    "RESERVE_MARK",
    "Flush",
    "decode_reserved",
    "expired_counts",
    "held_deltas",
    "held_epoch",
    "held_milli",
    "lost_milli",
    "reserve_attr",
    "reserve_epoch",
]
