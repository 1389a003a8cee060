"""A bucket item's `ttl`: the epoch second after which DynamoDB may delete it.

A write that moves a bucket also moves its expiry, and one that raises a shard count
removes it: `with_expiry` adds the part to an UpdateItem already built, and an acquire's
take (keys/takes.py `take_write`, `expiry=`) carries the same part in its cached
expression (a sharded bucket never expires: its
shards' shares are only right together, see flows/write/plan.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zae_limiter.keys.core import TTL, Item, n

#: The name and value placeholders of the expiry part; no other bucket write uses them.
EXPIRY_NAME, EXPIRY_VALUE = "#ttl", ":ttl"


def expiry_update(update: str, remove: bool) -> str:
    """An update expression `[SET ...] [ADD ...] [REMOVE ...]` that also SETs `ttl` (to
    the value `:ttl`), or REMOVEs it (`remove`). keys/takes.py caches it per shape."""
    if remove:
        removed = f" REMOVE {EXPIRY_NAME}"
        return f"{update}, {EXPIRY_NAME}" if " REMOVE " in f" {update}" else update + removed
    part = f"{EXPIRY_NAME} = {EXPIRY_VALUE}"
    return f"SET {part}, {update[4:]}" if update.startswith("SET ") else f"SET {part} {update}"


def with_expiry(params: Mapping[str, Any], expires_at_s: int | None) -> dict[str, Any]:
    """`params` (an UpdateItem whose expression is `[SET ...] [ADD ...] [REMOVE ...]`)
    that also SETs `ttl` to `expires_at_s`, or REMOVEs it (None: the item must not
    expire)."""
    update = expiry_update(str(params["UpdateExpression"]), expires_at_s is None)
    names = dict(params.get("ExpressionAttributeNames", {}))
    values = dict(params.get("ExpressionAttributeValues", {}))
    names[EXPIRY_NAME] = TTL
    if expires_at_s is not None:
        values[EXPIRY_VALUE] = n(expires_at_s)
    out = {**params, "UpdateExpression": update, "ExpressionAttributeNames": names}
    if values:
        out["ExpressionAttributeValues"] = values
    return out


def item_with_expiry(item: Item, expires_at_s: int | None) -> Item:
    """A bucket item as first written, with its `ttl` (none: it must not expire)."""
    return item if expires_at_s is None else {**item, TTL: n(expires_at_s)}


def expiry_of(item: Mapping[str, Any] | None) -> int | None:
    """The `ttl` an item carries (epoch seconds), if any."""
    value = (item or {}).get(TTL)
    return None if value is None else int(value["N"])


__all__ = [
    "EXPIRY_NAME",
    "EXPIRY_VALUE",
    "expiry_of",
    "expiry_update",
    "item_with_expiry", "with_expiry"]
