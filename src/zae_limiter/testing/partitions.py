"""What the partition emulator counts, without I/O: which partitions a DynamoDB request
writes, and per-partition write windows (a fixed window per second, or a token bucket
refilled continuously) with per-second statistics. `emulator.py` puts it behind a
loopback HTTP proxy.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TARGET_PREFIX = "DynamoDB_20120810."
WRITE_OPERATIONS = frozenset(
    {"UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
)


# ---------------------------------------------------------------- request parsing (pure)


def operation(target: str | None) -> str:
    """`UpdateItem` from `X-Amz-Target: DynamoDB_20120810.UpdateItem` ("" if absent)."""
    if not target:
        return ""
    return target.removeprefix(TARGET_PREFIX)


def _key_value(item: Any, pk_attribute: str) -> str | None:
    if not isinstance(item, Mapping):
        return None
    attr = item.get(pk_attribute)
    if not isinstance(attr, Mapping):
        return None
    for kind in ("S", "N", "B"):
        if kind in attr:
            return str(attr[kind])
    return None


def _transact_keys(body: Mapping[str, Any], pk_attribute: str) -> Iterable[str | None]:
    for entry in body.get("TransactItems", []):
        for kind in ("Put", "Update", "Delete", "ConditionCheck"):
            part = entry.get(kind)
            if isinstance(part, Mapping):
                yield _key_value(part.get("Item") or part.get("Key"), pk_attribute)


def _batch_keys(body: Mapping[str, Any], pk_attribute: str) -> Iterable[str | None]:
    for requests in body.get("RequestItems", {}).values():
        for request in requests:
            if "PutRequest" in request:
                yield _key_value(request["PutRequest"].get("Item"), pk_attribute)
            elif "DeleteRequest" in request:
                yield _key_value(request["DeleteRequest"].get("Key"), pk_attribute)


def written_partitions(op: str, body: Mapping[str, Any], pk_attribute: str = "PK") -> list[str]:
    """The partition key of every item `op` writes, one entry per item (may repeat).

    Reads and unknown operations write nothing. A ConditionCheck in a transaction is
    counted: DynamoDB charges it as a write.
    """
    if op in ("UpdateItem", "DeleteItem"):
        found: Iterable[str | None] = [_key_value(body.get("Key"), pk_attribute)]
    elif op == "PutItem":
        found = [_key_value(body.get("Item"), pk_attribute)]
    elif op == "TransactWriteItems":
        found = _transact_keys(body, pk_attribute)
    elif op == "BatchWriteItem":
        found = _batch_keys(body, pk_attribute)
    else:
        return []
    return [pk for pk in found if pk is not None]


# ---------------------------------------------------------------- the window (pure)


@dataclass(frozen=True, slots=True)
class Count:
    """Writes forwarded to DynamoDB and writes refused with a throttle."""

    forwarded: int = 0
    throttled: int = 0


@dataclass(frozen=True, slots=True)
class EmulatorStats:
    """A snapshot of the emulator's counters. Seconds are whole epoch seconds."""

    writes_per_second: int
    reads: int
    forwarded_writes: int
    throttled_writes: int
    throttled_requests: int
    by_partition: dict[str, Count] = field(default_factory=dict)
    by_second: dict[int, Count] = field(default_factory=dict)
    by_second_partition: dict[int, dict[str, Count]] = field(default_factory=dict)
    #: Requests by operation (`GetItem`, `UpdateItem` ...): forwarded and throttled.
    by_operation: dict[str, Count] = field(default_factory=dict)

    def throttled_for(self, prefix: str = "") -> int:
        """Throttled writes on partitions whose key starts with `prefix`."""
        return sum(c.throttled for pk, c in self.by_partition.items() if pk.startswith(prefix))

    def second(self, epoch_second: int, prefix: str = "") -> Count:
        """One second's counts, over partitions whose key starts with `prefix`."""
        parts = self.by_second_partition.get(epoch_second, {})
        chosen = [c for pk, c in parts.items() if pk.startswith(prefix)]
        return Count(sum(c.forwarded for c in chosen), sum(c.throttled for c in chosen))


FIXED = "fixed"
SMOOTH = "smooth"
#: Whose limit refused a request (`PartitionWindow.refusal`).
TABLE = "table"
PARTITION = "partition"


class PartitionWindow:
    """Per-partition write limits; thread-safe, no I/O.

    `admit(pks, now)` decides one request: it is admitted only if every partition it
    writes has room for its writes; then they are counted. A refused request counts as
    throttled on each of its partitions and consumes nothing. Two shapes of room:

    - "fixed": at most `writes_per_second` writes in each wall-clock second. Under
      sustained overload the first writes of a second win and every later one loses.
    - "smooth": a token bucket per partition, `writes_per_second` deep, refilled
      continuously (DynamoDB's own shape): under overload a write wins about as often
      as its share of the traffic, whenever in the second it comes.

    `table_writes_per_second` adds a limit on the whole table (a smooth bucket that deep,
    over every partition's writes), as a provisioned table at its capacity or an account
    limit throttles: then every key is throttled, however its writes are spread.
    """

    def __init__(
        self,
        writes_per_second: int,
        shape: str = FIXED,
        table_writes_per_second: int | None = None,
    ) -> None:
        if writes_per_second < 1:
            raise ValueError(f"writes_per_second must be at least 1, got {writes_per_second}")
        if shape not in (FIXED, SMOOTH):
            raise ValueError(f"shape must be {FIXED!r} or {SMOOTH!r}, got {shape!r}")
        check_table_limit(table_writes_per_second)
        self.writes_per_second = writes_per_second
        self.table_writes_per_second = table_writes_per_second
        self.shape = shape
        self._table: tuple[float, float] | None = None  # (tokens, as of) of the table
        self._lock = threading.Lock()
        self._second = -1
        self._current: Counter[str] = Counter()
        self._buckets: dict[str, tuple[float, float]] = {}  # pk -> (tokens, as of)
        self._reads = 0
        self._throttled_requests = 0
        self._operations: dict[str, list[int]] = {}  # operation -> [forwarded, throttled]
        # epoch second -> partition -> [forwarded, throttled]
        self._history: dict[int, dict[str, list[int]]] = {}

    def admit(self, pks: Sequence[str], now: float) -> bool:
        return self.refusal(pks, now) is None

    def refusal(self, pks: Sequence[str], now: float) -> str | None:
        """`admit`, saying whose limit refused the request: None (admitted), `TABLE`
        (the table's limit) or `PARTITION` (a partition's own)."""
        wanted = Counter(pks)
        with self._lock:
            table = self._table_room(len(pks), now)
            if table is None:
                second, ok = int(now), False
            elif self.shape == SMOOTH:
                second, ok = int(now), self._smooth(wanted, now)
            else:
                second, ok = self._fixed(wanted, now)
            if ok and table is not None and self.table_writes_per_second is not None:
                self._table = (table[0] - len(pks), table[1])
            row = self._history.setdefault(second, {})
            for pk, n in wanted.items():
                cell = row.setdefault(pk, [0, 0])
                cell[0 if ok else 1] += n
            if not ok and wanted:
                self._throttled_requests += 1
            if ok:
                return None
            return TABLE if table is None else PARTITION

    def _fixed(self, wanted: Counter[str], now: float) -> tuple[int, bool]:
        # Windows only move forward; a late request counts in the current one.
        if int(now) > self._second:
            self._second = int(now)
            self._current = Counter()
        limit = self.writes_per_second
        ok = all(self._current[pk] + n <= limit for pk, n in wanted.items())
        if ok:
            self._current.update(wanted)
        return self._second, ok

    def _table_room(self, writes: int, now: float) -> tuple[float, float] | None:
        """The table bucket's (tokens, as of) now, or None when it cannot take `writes`."""
        rate = self.table_writes_per_second
        if rate is None or not writes:
            return (0.0, now)
        tokens, since = self._table if self._table is not None else (float(rate), now)
        as_of = max(now, since)
        tokens = min(float(rate), tokens + (as_of - since) * rate)
        self._table = (tokens, as_of)
        return (tokens, as_of) if tokens >= writes else None

    def _smooth(self, wanted: Counter[str], now: float) -> bool:
        rate = float(self.writes_per_second)
        levels: dict[str, tuple[float, float]] = {}
        for pk in wanted:
            tokens, since = self._buckets.get(pk, (rate, now))
            as_of = max(now, since)  # a late request refills nothing
            levels[pk] = (min(rate, tokens + (as_of - since) * rate), as_of)
        ok = all(levels[pk][0] >= n for pk, n in wanted.items())
        for pk, n in wanted.items():
            tokens, as_of = levels[pk]
            self._buckets[pk] = (tokens - n if ok else tokens, as_of)
        return ok

    def count_read(self, op: str = "") -> None:
        with self._lock:
            self._reads += 1
            if op:
                self._operations.setdefault(op, [0, 0])[0] += 1

    def count_operation(self, op: str, throttled: bool) -> None:
        """One request of `op` (a write; reads count through `count_read`)."""
        with self._lock:
            self._operations.setdefault(op, [0, 0])[1 if throttled else 0] += 1

    def stats(self) -> EmulatorStats:
        with self._lock:
            history = {
                s: {pk: Count(*c) for pk, c in row.items()} for s, row in self._history.items()
            }
            reads, throttled_requests = self._reads, self._throttled_requests
            operations = {op: Count(*c) for op, c in self._operations.items()}
        by_partition: dict[str, Count] = {}
        by_second: dict[int, Count] = {}
        for second, row in sorted(history.items()):
            by_second[second] = Count(
                sum(c.forwarded for c in row.values()), sum(c.throttled for c in row.values())
            )
            for pk, c in row.items():
                was = by_partition.get(pk, Count())
                by_partition[pk] = Count(was.forwarded + c.forwarded, was.throttled + c.throttled)
        return EmulatorStats(
            writes_per_second=self.writes_per_second,
            reads=reads,
            forwarded_writes=sum(c.forwarded for c in by_second.values()),
            throttled_writes=sum(c.throttled for c in by_second.values()),
            throttled_requests=throttled_requests,
            by_partition=by_partition,
            by_second=by_second,
            by_second_partition=history,
            by_operation=operations,
        )

    def reset(self) -> None:
        """Forget every count (the current window too)."""
        with self._lock:
            self._second = -1
            self._current = Counter()
            self._buckets = {}
            self._table = None
            self._reads = 0
            self._throttled_requests = 0
            self._operations = {}
            self._history = {}


def check_table_limit(value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"table_writes_per_second must be at least 1 (or None), got {value}")


def parse_partitions(op: str, body: bytes, pk_attribute: str) -> list[str]:
    try:
        decoded = json.loads(body or b"{}")
    except ValueError:
        return []  # let the upstream reject what it cannot parse
    return written_partitions(op, decoded, pk_attribute) if isinstance(decoded, dict) else []
