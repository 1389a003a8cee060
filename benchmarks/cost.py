"""What a million acquires cost on each path, at DynamoDB on-demand prices.

On-demand bills write request units (1 per KB written, indexes included; a failed
conditional write too) and read request units (1 per 4 KB strongly consistent read,
0.5 eventually consistent). The figures come from the measured capacity of each path,
so they are the table's bill only: streams, the aggregator, storage and data transfer
are extra.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.capacity import CapacityRun

#: US East (N. Virginia) on-demand prices, dollars per million request units.
WRU_PRICE_PER_MILLION = 0.625
RRU_PRICE_PER_MILLION = 0.125


@dataclass(frozen=True, slots=True)
class PathCost:
    key: str
    title: str
    rcu: float
    wcu: float

    @property
    def dollars_per_million(self) -> float:
        return per_million(self.rcu, self.wcu)


def per_million(rcu: float, wcu: float) -> float:
    """Dollars per million acquires that each use `rcu` read and `wcu` write units."""
    return wcu * WRU_PRICE_PER_MILLION + rcu * RRU_PRICE_PER_MILLION


def costs(run: CapacityRun) -> list[PathCost]:
    return [
        PathCost(p.budget.key, p.budget.title, p.measured.rcu, p.measured.wcu) for p in run.paths
    ]
