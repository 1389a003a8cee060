"""What a call reports as ConsumedCapacity: plausible units, as DynamoDB counts them.

A write costs 1 WCU per started KB of the larger of its old and new item, plus, for each
index it changes, the same for the index's projection of the item (twice when the index
key moved: a delete and a put). Reads cost 0.5 RCU per started 4 KB, 1 when strongly
consistent; a read of an index is charged to the index. The shape is DynamoDB Local's.

Every single-item call reports what DynamoDB Local reports (the conformance test checks
it). Three differences remain on purpose, where Local does not count as AWS documents:
a transaction costs twice (Local: once), BatchGetItem rounds each item (Local: the sum),
and a read of a KEYS_ONLY index counts the projected entries (Local: whole items).
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
    params: dict[str, Any], table: str, units: float, indexes: dict[str, float] | None = None
) -> dict[str, Any] | None:
    """The ConsumedCapacity entry of one table, in the shape DynamoDB Local reports it
    (total, table, and each index that consumed; no Read/WriteCapacityUnits split)."""
    mode = params.get("ReturnConsumedCapacity", "NONE")
    if mode not in ("INDEXES", "TOTAL"):
        return None
    out: dict[str, Any] = {
        "TableName": table,
        "CapacityUnits": units + sum((indexes or {}).values()),
    }
    if mode == "INDEXES":
        out["Table"] = {"CapacityUnits": units}
        if indexes:
            out["GlobalSecondaryIndexes"] = {
                name: {"CapacityUnits": u} for name, u in indexes.items()
            }
    return out


class Tally:
    """Units of a batch or a transaction, per table and index, in the order first met."""

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor
        self.tables: dict[str, tuple[float, dict[str, float]]] = {}

    def add(self, table: str, units: float, indexes: dict[str, float]) -> None:
        own, by_index = self.tables.get(table, (0.0, {}))
        for name, spent in indexes.items():
            by_index[name] = by_index.get(name, 0.0) + spent * self.factor
        self.tables[table] = (own + units * self.factor, by_index)

    def report(self, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        entries = [
            consumed(params, name, units, indexes) for name, (units, indexes) in self.tables.items()
        ]
        found = [entry for entry in entries if entry is not None]
        return found or None
