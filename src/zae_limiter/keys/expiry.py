"""A bucket item's `ttl`: the epoch second after which DynamoDB may delete it.

Kept apart from the take expressions (keys/takes.py): `with_expiry` adds it to an
UpdateItem that is already built, so a write that moves a bucket also moves its expiry,
and one that raises a shard count removes it (a sharded bucket never expires: its
shards' shares are only right together, see flows/expiry.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zae_limiter.keys.core import TTL, Item, n

#: The name and value placeholders of the expiry part; no other bucket write uses them.
_NAME, _VALUE = "#ttl", ":ttl"


def with_expiry(params: Mapping[str, Any], expires_at_s: int | None) -> dict[str, Any]:
    """`params` (an UpdateItem whose expression is `[SET ...] [ADD ...] [REMOVE ...]`)
    that also SETs `ttl` to `expires_at_s`, or REMOVEs it (None: the item must not
    expire)."""
    update = str(params["UpdateExpression"])
    names = {**params.get("ExpressionAttributeNames", {}), _NAME: TTL}
    values = dict(params.get("ExpressionAttributeValues", {}))
    if expires_at_s is None:
        update = f"{update}, {_NAME}" if " REMOVE " in f" {update}" else f"{update} REMOVE {_NAME}"
    else:
        values[_VALUE] = n(expires_at_s)
        part = f"{_NAME} = {_VALUE}"
        update = (
            f"SET {part}, {update[4:]}" if update.startswith("SET ") else f"SET {part} {update}"
        )
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


__all__ = ["expiry_of", "item_with_expiry", "with_expiry"]
