"""What a call reports as ConsumedCapacity: plausible units, as DynamoDB counts them.

A write costs 1 WCU per started KB of the larger of its old and new item, plus, for each
index it changes, the same for the index's projection of the item (twice when the index
key moved: a delete and a put). Reads cost 0.5 RCU per started 4 KB, 1 when strongly
consistent. Transactions double both (engine.py).
"""

from __future__ import annotations

import math
from typing import Any

from zae_limiter.sim.engine import ops
from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.table import Index


def write_units(planned: ops.Planned) -> tuple[float, dict[str, float]]:
    """1 WCU per started KB of the larger image; each index the write changes adds its own
    (a moved index key: a delete and a put)."""
    size = max(planned.old_size, planned.size)
    units = float(max(1, math.ceil(size / 1024)))
    indexes: dict[str, float] = {}
    # A KEYS_ONLY index whose keys did not move receives no write (DESIGN.md, 3).
    kept = planned.table.index_keys_kept(planned.old, planned.new)
    for index in planned.table.indexes.values():
        if kept and index.keys_only:
            continue
        spent = _index_units(planned, index)
        if spent:
            indexes[index.name] = spent
    return units, indexes


def _index_units(planned: ops.Planned, index: Index) -> float:
    old, new, key = planned.old, planned.new, planned.key
    before = None if old is None else index.entry(old, key)
    after = None if new is None else index.entry(new, key)
    if before is None and after is None:
        return 0.0
    names = planned.table.key_names
    if before == after:
        kind = index.projection.get("ProjectionType", "ALL")
        if kind == "KEYS_ONLY" or old is None or new is None:
            return 0.0
        seen = index.projected(new, names)
        if seen == index.projected(old, names):
            return 0.0
        return float(max(1, math.ceil(v.item_bytes(seen) / 1024)))
    units = 0.0
    for item, entry in ((old, before), (new, after)):
        if item is not None and entry is not None:
            units += max(1, math.ceil(v.item_bytes(index.projected(item, names)) / 1024))
    return units


def consumed(
    params: dict[str, Any], table: str, units: float, indexes: dict[str, float] | None = None,
    kind: str = "Write",
) -> dict[str, Any] | None:
    mode = params.get("ReturnConsumedCapacity", "NONE")
    if mode not in ("INDEXES", "TOTAL"):
        return None
    total = units + sum((indexes or {}).values())
    out: dict[str, Any] = {"TableName": table, "CapacityUnits": total,
                           f"{kind}CapacityUnits": total}
    if mode == "INDEXES":
        out["Table"] = {"CapacityUnits": units, f"{kind}CapacityUnits": units}
        if indexes:
            out["GlobalSecondaryIndexes"] = {
                name: {"CapacityUnits": u, f"{kind}CapacityUnits": u}
                for name, u in indexes.items()
            }
    return out
