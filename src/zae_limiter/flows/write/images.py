"""What one client remembers of each shard it wrote: the item as its last write left it,
and its failed writes that no window has counted yet. `BucketImages` and
`UncountedWrites` are the only writers of that state; each entity a client knows holds one
of each (flows/context.py `EntityState`), and flows/write/memory.py and take.py use them.
"""

from __future__ import annotations

from typing import Any

#: (resource, shard id) of one entity.
Where = tuple[str, int]


class BucketImages:
    """One entity's shards as this client's last write to each left them (ALL_NEW), and
    when each image was taken (this client's clock, ms): the next write there picks its
    forms from it (keys/takes.py), and a write planned from it must name every reserve
    epoch that may have been raised since (flows/write/plan.py)."""

    __slots__ = ("at", "items")

    def __init__(self) -> None:
        self.items: dict[Where, Any] = {}
        self.at: dict[Where, int] = {}

    def keep(self, where: Where, item: Any, now_ms: int) -> None:
        self.items[where] = item
        self.at[where] = now_ms

    def get(self, where: Where) -> Any:
        return self.items.get(where)


class UncountedWrites:
    """This client's failed conditional writes per resource that no write of its own has
    counted in a shard's window yet, and when (ms; flows/write/take.py)."""

    __slots__ = ("failed",)

    def __init__(self) -> None:
        self.failed: dict[str, tuple[int, int]] = {}

    def take(self, resource: str, now_ms: int, max_age_ms: int) -> int:
        """The count left for `resource`, now counted (0 when older than `max_age_ms`)."""
        count, since = self.failed.pop(resource, (0, now_ms))
        return count if now_ms - since <= max_age_ms else 0

    def leave(self, resource: str, count: int, now_ms: int, cap: int) -> None:
        # Added to what another acquire of this client (a thread of a shared client) left
        # meanwhile, never written over it.
        before, _at = self.failed.get(resource, (0, now_ms))
        self.failed[resource] = (min(before + count, cap), now_ms)
