"""A client's demand on one bucket: acquires and amounts as decayed sums, read as rates.

Token reserves are sized from it (flows/reserves/book.py): a reserve lasts the target period at
the rate the client shows, so the estimate must follow a change within about a second and
must not mistake a few acquires in the first milliseconds for a rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Demand is a moving rate with this time constant (ms): it follows a change in a second.
DEMAND_TAU_MS = 1000
DEMAND_TAU_S = DEMAND_TAU_MS / 1000
#: The youngest a demand record is read as, sizing a reserve (ms): a few acquires in the
#: first milliseconds are no measure of a rate.
DEMAND_MIN_AGE_MS = 250
#: Demand estimates kept before quiet ones are forgotten, and how quiet that is (ms).
DEMAND_KEYS_MAX = 10_000
DEMAND_FORGET_MS = 10 * DEMAND_TAU_MS


@dataclass(slots=True)
class Demand:
    """Decayed sums of acquires and amounts (a rate is the sum over the time constant)."""

    at_ms: int
    count: float = 0.0
    amounts: dict[str, float] = field(default_factory=dict)
    #: When the client first saw the bucket (the sums fill up over the time constant).
    born_ms: int = 0

    def per_second(self, total: float, now_ms: int) -> float:
        """A rate from a decayed sum, for sizing under throttling: a record younger than
        the time constant has not filled up yet (at a steady rate its sum is
        `1 - exp(-age / tau)` of what it will be), and is read as the rate it shows so
        far. Without this, the first reserves of a cold start on a throttling partition
        are sized for a fraction of the client's rate, and each costs a write the
        partition barely gives."""
        age = max(now_ms - self.born_ms, DEMAND_MIN_AGE_MS)
        filled = 1.0 - math.exp(-age / DEMAND_TAU_MS) if age < 5 * DEMAND_TAU_MS else 1.0
        return total * 1000 / DEMAND_TAU_MS / filled

    def decay(self, now_ms: int) -> None:
        if now_ms > self.at_ms:
            factor = math.exp(-(now_ms - self.at_ms) / DEMAND_TAU_MS)
            self.count *= factor
            for name in self.amounts:
                self.amounts[name] *= factor
            self.at_ms = now_ms
