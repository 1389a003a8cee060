"""The capacity meter: what each DynamoDB call cost, as DynamoDB reports it.

Every call carries `ReturnConsumedCapacity=INDEXES`; a failed conditional write is
counted as 1 WCU (DynamoDB charges it but does not report it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

WRITE_OPS = frozenset(
    {"put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items"}
)
METERED_OPS = WRITE_OPS | frozenset(
    {"get_item", "batch_get_item", "query", "scan", "transact_get_items"}
)


@dataclass(frozen=True, slots=True)
class CallRecord:
    op: str
    rcu: float
    wcu: float
    ok: bool
    round_trip: int


@dataclass(slots=True)
class Measurement:
    """Calls recorded while a `measure()` block was open."""

    calls: list[CallRecord] = field(default_factory=list)

    @property
    def round_trips(self) -> int:
        return len({c.round_trip for c in self.calls})

    @property
    def ops(self) -> list[str]:
        return [c.op for c in self.calls]

    @property
    def rcu(self) -> float:
        return sum(c.rcu for c in self.calls)

    @property
    def wcu(self) -> float:
        return sum(c.wcu for c in self.calls)


def _units(consumed: Any) -> float:
    """Total units of a response, table and indexes (`CapacityUnits` includes both)."""
    entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
    return sum(float(entry.get("CapacityUnits", 0) or 0) for entry in entries)


class CapacityMeter:
    """Totals since creation, and per-call records inside `measure()` blocks."""

    def __init__(self) -> None:
        self.total_rcu = 0.0
        self.total_wcu = 0.0
        self.total_calls = 0
        self._round_trip = 0
        self._open: list[Measurement] = []

    def next_round_trip(self) -> int:
        self._round_trip += 1
        return self._round_trip

    def record(self, op: str, response: Mapping[str, Any], ok: bool, round_trip: int) -> None:
        units = _units(response.get("ConsumedCapacity"))
        if op in WRITE_OPS:
            rcu, wcu = 0.0, units if ok or units else 1.0
        else:
            rcu, wcu = units, 0.0
        self.total_calls += 1
        self.total_rcu += rcu
        self.total_wcu += wcu
        if self._open:
            record = CallRecord(op, rcu, wcu, ok, round_trip)
            for measurement in self._open:
                measurement.calls.append(record)

    @contextmanager
    def measure(self) -> Iterator[Measurement]:
        measurement = Measurement()
        self._open.append(measurement)
        try:
            yield measurement
        finally:
            self._open.remove(measurement)
