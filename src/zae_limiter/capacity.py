"""The client's own DynamoDB capacity: the meter, and admission control.

The meter: every call carries `ReturnConsumedCapacity=INDEXES`; a failed conditional
write is counted as 1 WCU (DynamoDB charges it but does not report it).

Admission control (`FixedRate`, `AdaptiveRate`): a local token bucket of capacity units
per side (read, write). Before a call the driver asks `Admission.admit(cost, now_ms)`,
which reserves the estimated units and answers how long to wait first, or `REFUSE` when
the wait would pass `max_wait`; after the call, `settle` corrects the reservation by what
DynamoDB reported. The object is pure (time is an argument), so the sync and the async
driver share it; only they sleep.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from zae_limiter.errors import THROTTLE_CODES as THROTTLE_CODES  # re-exported for drivers

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
    if not consumed:
        return 0.0
    if isinstance(consumed, list):
        return sum(float(entry.get("CapacityUnits", 0) or 0) for entry in consumed)
    return float(consumed.get("CapacityUnits", 0) or 0)


@dataclass(frozen=True, slots=True)
class Cost:
    """Capacity units a call will use (estimated) or used (reported)."""

    rcu: float = 0.0
    wcu: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.rcu + other.rcu, self.wcu + other.wcu)

    def __sub__(self, other: Cost) -> Cost:
        return Cost(self.rcu - other.rcu, self.wcu - other.wcu)

    def __bool__(self) -> bool:
        return self.rcu != 0 or self.wcu != 0


def reported(op: str, response: Mapping[str, Any], ok: bool) -> Cost:
    """What DynamoDB says a call cost (a failed conditional write counts as 1 WCU)."""
    consumed = response.get("ConsumedCapacity")
    if isinstance(consumed, dict):  # one call's own: `_units` without the call
        units = float(consumed.get("CapacityUnits", 0) or 0)
    else:
        units = _units(consumed)
    if op in WRITE_OPS:
        return Cost(wcu=units if ok or units else 1.0)
    return Cost(rcu=units)


class CapacityMeter:
    """Totals since creation, and per-call records inside `measure()` blocks."""

    def __init__(self) -> None:
        self.total_rcu = 0.0
        self.total_wcu = 0.0
        self.total_calls = 0
        self.throttles = 0
        self._round_trip = 0
        self._open: list[Measurement] = []

    def next_round_trip(self) -> int:
        self._round_trip += 1
        return self._round_trip

    def record(self, op: str, response: Mapping[str, Any], ok: bool, round_trip: int) -> Cost:
        cost = reported(op, response, ok)
        self.total_calls += 1
        self.total_rcu += cost.rcu
        self.total_wcu += cost.wcu
        if self._open:
            record = CallRecord(op, cost.rcu, cost.wcu, ok, round_trip)
            for measurement in self._open:
                measurement.calls.append(record)
        return cost

    def record_throttle(self) -> None:
        self.throttles += 1

    @contextmanager
    def measure(self) -> Iterator[Measurement]:
        measurement = Measurement()
        self._open.append(measurement)
        try:
            yield measurement
        finally:
            self._open.remove(measurement)


# ------------------------------------------------------------------ admission control
#: `Admission.admit` returns this instead of a wait: the call must not be made.
REFUSE = -1
DEFAULT_MAX_WAIT = 0.5
ADAPTIVE_CUT = 0.8
ADAPTIVE_GROWTH = 1.1
ADAPTIVE_QUIET_MS = 10_000


def _keys_in(request_items: Any) -> int:
    if not isinstance(request_items, Mapping):
        return 0
    total = 0
    for entry in request_items.values():
        total += len(entry.get("Keys", ())) if isinstance(entry, Mapping) else len(entry)
    return total


def estimate(op: str, params: Mapping[str, Any]) -> Cost:
    """What a call will cost before it is made; corrected by `ConsumedCapacity` after."""
    if op in ("put_item", "update_item", "delete_item"):
        return Cost(wcu=1.0)
    if op == "batch_write_item":
        return Cost(wcu=float(_keys_in(params.get("RequestItems"))))
    if op == "transact_write_items":
        return Cost(wcu=2.0 * len(params.get("TransactItems", ())))
    if op == "get_item":
        return Cost(rcu=1.0 if params.get("ConsistentRead") else 0.5)
    if op == "batch_get_item":
        return Cost(rcu=0.5 * _keys_in(params.get("RequestItems")))
    if op == "transact_get_items":
        return Cost(rcu=2.0 * len(params.get("TransactItems", ())))
    if op in ("query", "scan"):
        return Cost(rcu=1.0)
    return Cost()


@dataclass(frozen=True, slots=True)
class FixedRate:
    """A constant budget of capacity units per second; `None` leaves that side unlimited.

    `burst` is the most a quiet client may spend at once (default: one second's rate).
    """

    rcu: float | None = None
    wcu: float | None = None
    burst: float | None = None

    def __post_init__(self) -> None:
        for name in ("rcu", "wcu", "burst"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"FixedRate.{name} must be positive, got {value}")


@dataclass(frozen=True, slots=True)
class AdaptiveRate:
    """Starts at half of max; -20% on a throttle, +10% after 10 s without one."""

    max_rcu: float
    max_wcu: float | None = None
    min_rcu: float = 1
    min_wcu: float = 1

    def __post_init__(self) -> None:
        if self.min_rcu <= 0 or self.min_wcu <= 0:
            raise ValueError("AdaptiveRate minimums must be positive")
        if self.max_rcu < self.min_rcu or (
            self.max_wcu is not None and self.max_wcu < self.min_wcu
        ):
            raise ValueError("AdaptiveRate maximums must be at least the minimums")


CapacityPolicy = FixedRate | AdaptiveRate


class _Lane:
    """One token bucket of capacity units (float units; `rate` per second)."""

    def __init__(self, rate: float, burst: float | None, lo: float, hi: float) -> None:
        self.rate, self.lo, self.hi = rate, lo, hi
        self.fixed_burst = burst
        self.tokens = self.burst
        self.last_ms: int | None = None

    @property
    def burst(self) -> float:
        return self.fixed_burst if self.fixed_burst is not None else self.rate

    def refill(self, now_ms: int) -> None:
        if self.last_ms is not None and now_ms > self.last_ms:
            self.tokens = min(self.burst, self.tokens + self.rate * (now_ms - self.last_ms) / 1000)
        if self.last_ms is None or now_ms > self.last_ms:
            self.last_ms = now_ms

    def wait_ms(self, units: float) -> float:
        # A call bigger than the burst goes when the bucket is full, and leaves debt.
        deficit = min(units, self.burst) - self.tokens
        return 0.0 if deficit <= 0 else deficit * 1000 / self.rate

    def scale(self, factor: float) -> None:
        self.rate = min(self.hi, max(self.lo, self.rate * factor))
        self.tokens = min(self.tokens, self.burst)


def _lanes(policy: CapacityPolicy) -> tuple[_Lane | None, _Lane | None]:
    if isinstance(policy, FixedRate):
        return (
            _Lane(policy.rcu, policy.burst, policy.rcu, policy.rcu) if policy.rcu else None,
            _Lane(policy.wcu, policy.burst, policy.wcu, policy.wcu) if policy.wcu else None,
        )
    rcu = _Lane(max(policy.min_rcu, policy.max_rcu / 2), None, policy.min_rcu, policy.max_rcu)
    wcu = None
    if policy.max_wcu is not None:
        start = max(policy.min_wcu, policy.max_wcu / 2)
        wcu = _Lane(start, None, policy.min_wcu, policy.max_wcu)
    return rcu, wcu


@dataclass(frozen=True, slots=True)
class CapacityStats:
    """What this client spent, and how admission control treated its calls."""

    consumed_rcu: float
    consumed_wcu: float
    calls: int
    throttles: int
    waits: int
    wait_seconds: float
    refusals: int
    rcu_rate: float | None
    wcu_rate: float | None


class Admission:
    """Admission control over one client's capacity units. Thread-safe; never sleeps."""

    def __init__(self, policy: CapacityPolicy, max_wait: float = DEFAULT_MAX_WAIT) -> None:
        if max_wait < 0:
            raise ValueError("max_wait must be 0 or more seconds")
        self.policy = policy
        self.max_wait_ms = int(max_wait * 1000)
        self.rcu, self.wcu = _lanes(policy)
        self.adaptive = isinstance(policy, AdaptiveRate)
        self._quiet_since: int | None = None
        self._lock = threading.Lock()
        self.waits = 0
        self.wait_ms_total = 0
        self.refusals = 0

    def _pairs(self, cost: Cost) -> list[tuple[_Lane, float]]:
        pairs = [(self.rcu, cost.rcu), (self.wcu, cost.wcu)]
        return [(lane, units) for lane, units in pairs if lane is not None and units]

    def admit(
        self, cost: Cost, now_ms: int, max_wait_ms: int | None = None, force: bool = False
    ) -> int:
        """Reserve `cost`; the ms to wait before the call, or `REFUSE`.

        `force` (giving tokens back) never refuses: it waits at most the bound, then goes
        into debt that later calls pay for.
        """
        limit = self.max_wait_ms if max_wait_ms is None else min(max_wait_ms, self.max_wait_ms)
        with self._lock:
            self._grow(now_ms)
            pairs = self._pairs(cost)
            for lane, _units in pairs:
                lane.refill(now_ms)
            wait = max((lane.wait_ms(units) for lane, units in pairs), default=0.0)
            wait_ms = int(wait + 0.999)
            if wait_ms > limit and not force:
                self.refusals += 1
                return REFUSE
            wait_ms = min(wait_ms, limit)
            for lane, units in pairs:
                lane.tokens -= units
            if wait_ms:
                self.waits += 1
                self.wait_ms_total += wait_ms
            return wait_ms

    def settle(self, estimated: Cost, actual: Cost) -> None:
        """Correct a reservation by what the call really used (refund or extra debt)."""
        with self._lock:
            for lane, units in self._pairs(actual - estimated):
                lane.tokens = min(lane.burst, lane.tokens - units)

    def throttled(self, now_ms: int) -> None:
        """DynamoDB throttled a call: an adaptive rate is cut by 20%."""
        with self._lock:
            self._quiet_since = now_ms
            if self.adaptive:
                for lane in (self.rcu, self.wcu):
                    if lane is not None:
                        lane.refill(now_ms)
                        lane.scale(ADAPTIVE_CUT)

    def _grow(self, now_ms: int) -> None:
        if not self.adaptive:
            return
        if self._quiet_since is None:
            self._quiet_since = now_ms
        while now_ms - self._quiet_since >= ADAPTIVE_QUIET_MS:
            self._quiet_since += ADAPTIVE_QUIET_MS
            for lane in (self.rcu, self.wcu):
                if lane is not None:
                    lane.refill(self._quiet_since)
                    lane.scale(ADAPTIVE_GROWTH)

    def rates(self, now_ms: int) -> tuple[float | None, float | None]:
        """The current (rcu, wcu) rates per second; None for an unlimited side."""
        with self._lock:
            self._grow(now_ms)
            return (
                self.rcu.rate if self.rcu is not None else None,
                self.wcu.rate if self.wcu is not None else None,
            )


def capacity_stats(meter: CapacityMeter, admission: Admission | None, now_ms: int) -> CapacityStats:
    rcu_rate, wcu_rate = admission.rates(now_ms) if admission is not None else (None, None)
    return CapacityStats(
        consumed_rcu=meter.total_rcu,
        consumed_wcu=meter.total_wcu,
        calls=meter.total_calls,
        throttles=meter.throttles,
        waits=admission.waits if admission else 0,
        wait_seconds=(admission.wait_ms_total / 1000) if admission else 0.0,
        refusals=admission.refusals if admission else 0,
        rcu_rate=rcu_rate,
        wcu_rate=wcu_rate,
    )
