"""One table: its key schema, its items, its global secondary indexes, sorted access.

Items are kept by their key's Python form `(hash, range)`; each partition also keeps its
range keys sorted, recomputed only after an insert or a delete (a modify moves nothing),
so a Query costs a bisect and a slice. A GSI entry points at the table key; what the
index projects is computed when it is read.
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass, field
from typing import Any, Protocol

from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.errors import Validation, invalid

Item = dict[str, v.Value]
TableKey = tuple[Any, Any]
MAX_ITEM_BYTES = 400 * 1024


class Tables(Protocol):
    """What the operations need of the engine (they do not import it: no circle)."""

    def table(self, name: Any) -> Table: ...


class Partition:
    """The entries of one partition key, by sort position, with a lazily sorted view."""

    __slots__ = ("_sorted", "entries")

    def __init__(self) -> None:
        self.entries: dict[Any, TableKey] = {}
        self._sorted: list[Any] | None = None

    def add(self, position: Any, key: TableKey) -> None:
        if position not in self.entries:
            self._sorted = None
        self.entries[position] = key

    def remove(self, position: Any) -> None:
        if self.entries.pop(position, None) is not None:
            self._sorted = None

    def ordered(self) -> list[Any]:
        if self._sorted is None:
            self._sorted = sorted(self.entries)
        return self._sorted

    def after(self, position: Any) -> int:
        """Index in `ordered()` of the first entry past `position`."""
        return bisect.bisect_right(self.ordered(), position)


@dataclass(slots=True)
class Index:
    name: str
    hash_key: str
    range_key: str | None
    projection: dict[str, Any]
    partitions: dict[Any, Partition] = field(default_factory=dict)

    @property
    def keys_only(self) -> bool:
        return bool(self.projection.get("ProjectionType") == "KEYS_ONLY")

    def entry(self, item: Item, key: TableKey) -> tuple[Any, Any] | None:
        """(partition, position) of the item in this index; None when it is not in it."""
        hv = item.get(self.hash_key)
        if hv is None:
            return None
        if self.range_key is None:
            return v.sort_key(hv), key
        rv = item.get(self.range_key)
        if rv is None:
            return None
        return v.sort_key(hv), (v.sort_key(rv), key)

    def projected(self, item: Item, table_keys: tuple[str, ...]) -> Item:
        kind = self.projection.get("ProjectionType", "ALL")
        if kind == "ALL":
            return item
        wanted = set(table_keys) | {self.hash_key}
        if self.range_key is not None:
            wanted.add(self.range_key)
        if kind == "INCLUDE":
            wanted.update(self.projection.get("NonKeyAttributes", []))
        return {k: val for k, val in item.items() if k in wanted}

    def describe(self) -> dict[str, Any]:
        schema = [{"AttributeName": self.hash_key, "KeyType": "HASH"}]
        if self.range_key is not None:
            schema.append({"AttributeName": self.range_key, "KeyType": "RANGE"})
        count = sum(len(p.entries) for p in self.partitions.values())
        return {
            "IndexName": self.name,
            "KeySchema": schema,
            "Projection": copy.deepcopy(self.projection),
            "IndexStatus": "ACTIVE",
            "ProvisionedThroughput": {
                "NumberOfDecreasesToday": 0,
                "ReadCapacityUnits": 0,
                "WriteCapacityUnits": 0,
            },
            "IndexSizeBytes": 0,
            "ItemCount": count,
        }


class Table:
    def __init__(self, params: dict[str, Any], created_ms: int) -> None:
        self.name: str = params["TableName"]
        self.params = params
        self.created_ms = created_ms
        self.types = {
            a["AttributeName"]: a["AttributeType"] for a in params["AttributeDefinitions"]
        }
        self.hash_key, self.range_key = _schema(params["KeySchema"])
        self.key_names: tuple[str, ...] = tuple(
            k for k in (self.hash_key, self.range_key) if k is not None
        )
        self.indexes: dict[str, Index] = {}
        for gsi in params.get("GlobalSecondaryIndexes") or []:
            hk, rk = _schema(gsi["KeySchema"])
            self.indexes[gsi["IndexName"]] = Index(
                gsi["IndexName"], hk, rk, dict(gsi.get("Projection") or {})
            )
        self.index_keys = frozenset(
            k for i in self.indexes.values() for k in (i.hash_key, i.range_key) if k
        )
        self.items: dict[TableKey, Item] = {}
        #: Billed size of each item, kept so a write's cost needs no re-measuring.
        self.sizes: dict[TableKey, int] = {}
        self.partitions: dict[Any, Partition] = {}
        spec = params.get("StreamSpecification") or {}
        self.stream_view: str | None = (
            spec.get("StreamViewType") if spec.get("StreamEnabled") else None
        )

    # ------------------------------------------------------------ keys
    def key_of(self, key: Any) -> tuple[TableKey, Item]:
        """The Python key and a stored copy of a request's `Key`."""
        if not isinstance(key, dict) or len(key) != len(self.key_names):
            raise Validation("The number of conditions on the keys is invalid")
        stored: Item = {}
        for name in self.key_names:
            value = key.get(name)
            if not isinstance(value, dict) or self.types[name] not in value or len(value) != 1:
                raise Validation("The provided key element does not match the schema")
            raw = value.get("S")
            if type(raw) is str and raw:
                # Every key the library sends: a non-empty string, kept as it is.
                stored[name] = {"S": raw}
                continue
            _non_empty_key(name, value)
            stored[name] = v.stored(value)
        return self._pykey(stored), stored

    def _pykey(self, item: Item) -> TableKey:
        rk = self.range_key
        return (
            v.sort_key(item[self.hash_key]),
            None if rk is None else v.sort_key(item[rk]),
        )

    def item_key(self, item: Item) -> Item:
        return {k: item[k] for k in self.key_names}

    def check_item(self, item: Item, size: int | None = None) -> tuple[TableKey, int]:
        """Validate an item to be stored (keys, index key types, size): its table key and
        billed size (`size`: already known)."""
        for name in self.key_names:
            value = item.get(name)
            if value is None:
                raise Validation("One of the required keys was not given a value")
            if self.types[name] not in value:
                raise invalid(
                    f"Type mismatch for key {name} expected: {self.types[name]} actual: "
                    f"{v.type_of(value)}"
                )
            _non_empty_key(name, value)
        for index in self.indexes.values():
            for index_key in (index.hash_key, index.range_key):
                value = item.get(index_key) if index_key else None
                if value is None or index_key is None:
                    continue
                name = index_key
                if self.types.get(name) not in value:
                    # DynamoDB Local's words; AWS adds the key, the types and the index.
                    raise invalid("Type mismatch for Index Key")
                _non_empty_key(name, value, index.name)
        return self._pykey(item), self.check_size(v.item_bytes(item) if size is None else size)

    @staticmethod
    def check_size(size: int) -> int:
        if size > MAX_ITEM_BYTES:
            raise Validation("Item size has exceeded the maximum allowed size")
        return size

    # ------------------------------------------------------------ writes
    def write(self, key: TableKey, new: Item | None, size: int = 0) -> Item | None:
        """Replace (or delete, `new` None) the item at `key`; the old item."""
        old = self.items.get(key)
        if new is None:
            if old is None:
                return None
            del self.items[key]
            del self.sizes[key]
            part = self.partitions[key[0]]
            part.remove(key[1])
            if not part.entries:
                del self.partitions[key[0]]
        else:
            self.items[key] = new
            self.sizes[key] = size
            if old is None:
                self.partitions.setdefault(key[0], Partition()).add(key[1], key)
        if self.indexes and not self.index_keys_kept(old, new):
            self._reindex(key, old, new)
        return old

    def index_keys_kept(self, old: Item | None, new: Item | None) -> bool:
        """No index key attribute changed: updates copy untouched values by reference."""
        if old is None or new is None:
            return False
        return all(old.get(k) is new.get(k) for k in self.index_keys)

    def _reindex(self, key: TableKey, old: Item | None, new: Item | None) -> None:
        for index in self.indexes.values():
            before = None if old is None else index.entry(old, key)
            after = None if new is None else index.entry(new, key)
            if before == after:
                continue
            if before is not None:
                part = index.partitions[before[0]]
                part.remove(before[1])
                if not part.entries:
                    del index.partitions[before[0]]
            if after is not None:
                index.partitions.setdefault(after[0], Partition()).add(after[1], key)

    # ------------------------------------------------------------ reads
    def partition(self, index: Index | None, hash_value: Any) -> Partition | None:
        if index is None:
            return self.partitions.get(hash_value)
        return index.partitions.get(hash_value)

    def describe(self, arn_prefix: str) -> dict[str, Any]:
        from datetime import UTC, datetime

        arn = f"{arn_prefix}:table/{self.name}"
        desc: dict[str, Any] = {
            "AttributeDefinitions": [dict(a) for a in self.params["AttributeDefinitions"]],
            "TableName": self.name,
            "KeySchema": [dict(k) for k in self.params["KeySchema"]],
            "TableStatus": "ACTIVE",
            "CreationDateTime": datetime.fromtimestamp(self.created_ms / 1000, tz=UTC),
            "ProvisionedThroughput": {
                "NumberOfDecreasesToday": 0,
                "ReadCapacityUnits": 0,
                "WriteCapacityUnits": 0,
            },
            "TableSizeBytes": sum(self.sizes.values()),
            "ItemCount": len(self.items),
            "TableArn": arn,
            "BillingModeSummary": {"BillingMode": self.params.get("BillingMode", "PROVISIONED")},
        }
        if self.indexes:
            desc["GlobalSecondaryIndexes"] = [
                {**i.describe(), "IndexArn": f"{arn}/index/{i.name}"} for i in self.indexes.values()
            ]
        if self.stream_view is not None:
            label = f"{self.created_ms:013d}"
            desc["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": self.stream_view,
            }
            desc["LatestStreamLabel"] = label
            desc["LatestStreamArn"] = f"{arn}/stream/{label}"
        return desc


def _schema(schema: list[dict[str, str]]) -> tuple[str, str | None]:
    hk = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
    rk = next((k["AttributeName"] for k in schema if k["KeyType"] == "RANGE"), None)
    return hk, rk


def _non_empty_key(name: str, value: v.Value, index: str | None = None) -> None:
    raw = value.get("S", value.get("B"))
    if raw is not None and len(raw) == 0:
        if index is not None:
            raise Validation(
                "One or more parameter values are not valid. A value specified for a "
                "secondary index key is not supported. The AttributeValue for a key "
                f"attribute cannot contain an empty string value. IndexName: {index}, "
                f"IndexKey: {name}"
            )
        raise Validation(
            "One or more parameter values are not valid. The AttributeValue for a key "
            f"attribute cannot contain an empty string value. Key: {name}"
        )
