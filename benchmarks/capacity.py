"""Capacity per acquire path: the budget the library implements, and the measurement.

`EXPECTED` is the budget table of DESIGN.md section 4 as the library implements it: one
row per path, with the design's own figures beside it where the design lists the path.
`tests/bench/test_report.py` measures every path on DynamoDB Local and fails on any
difference, so this table is the contract. Where the library does better than the
design, `design` keeps the design's figure and `note` says why.

Measured on DynamoDB Local (real consumed capacity, indexes included) when Java and the
jar are installed; otherwise on moto with the billing rules of `benchmarks.model`, which the
report labels "modelled".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from benchmarks import paths
from benchmarks.engines import (
    DYNAMODB_LOCAL,
    MOTO,
    create_table,
    dynamodb_local_missing,
    running,
)
from benchmarks.model import ModelledClient
from zae_limiter.capacity import Measurement

MEASURED = "measured on DynamoDB Local"
MODELLED = "modelled (moto run, DynamoDB billing rules)"


@dataclass(frozen=True, slots=True)
class Budget:
    round_trips: int
    rcu: float
    wcu: float

    def __str__(self) -> str:
        return f"{self.round_trips} RT / {self.rcu:g} RCU / {self.wcu:g} WCU"


@dataclass(frozen=True, slots=True)
class PathBudget:
    key: str
    title: str
    library: Budget
    design: Budget | None
    note: str = ""


# fmt: off
EXPECTED: tuple[PathBudget, ...] = (
    PathBudget("speculative_success", "speculative success",
               Budget(1, 0, 1), Budget(1, 0, 1)),
    PathBudget("speculative_cascade", "speculative success, cascade (parallel)",
               Budget(1, 0, 2), Budget(1, 0, 2), "child and parent written in one round trip"),
    PathBudget("rejection_known_locally", "rejection, bucket known exhausted locally",
               Budget(0, 0, 0), Budget(0, 0, 0), "remembered until its retry-after"),
    PathBudget("rejection_failed_condition", "rejection by failed condition",
               Budget(1, 0, 1), Budget(1, 0, 1), "a failed conditional write is billed 1 WCU"),
    PathBudget("refill_helps", "refill helps (drained, refilled since)",
               Budget(1, 0, 1), Budget(3, 1, 2),
               "better than the design: a full-at time counts the refill itself, so "
               "the one speculative write is exact (no read, no fallback)"),
    PathBudget("read_then_write", "read then write (speculative_writes=False)",
               Budget(2, 1, 1), None, "consistent GetItem, then the write"),
    PathBudget("first_acquire", "first acquire of a new entity (stored limits)",
               Budget(2, 1, 4), None,
               "one BatchGetItem reads configs, META and the bucket (0.5 RCU per item "
               "found: 2 here); creating the bucket writes the table and its three "
               "KEYS_ONLY indexes GSI2/3/4 (4 WCU, once per bucket)"),
    PathBudget("adjust_one_entity", "acquire + adjust, one entity",
               Budget(2, 0, 2), Budget(2, 0, 2), "adjust: +1 RT, +1 WCU per entity"),
    PathBudget("rollback_cascade", "acquire + rollback, cascade (two entities)",
               Budget(2, 0, 4), Budget(2, 0, 4),
               "rollback: +1 RT, +1 WCU per entity (written in parallel)"),
    PathBudget("shard_retry", "shard retry (first shard drained)",
               Budget(2, 0, 2), Budget(2, 0, 2)),
)
# fmt: on


@dataclass(frozen=True, slots=True)
class PathResult:
    budget: PathBudget
    measured: Budget
    ops: tuple[str, ...]

    @property
    def matches(self) -> bool:
        return self.measured == self.budget.library


@dataclass(frozen=True, slots=True)
class CapacityRun:
    source: str  # MEASURED or MODELLED
    engine: str
    paths: tuple[PathResult, ...]
    why_modelled: str | None = None

    @property
    def mismatches(self) -> list[PathResult]:
        return [p for p in self.paths if not p.matches]


def to_budget(m: Measurement) -> Budget:
    return Budget(m.round_trips, round(m.rcu, 3), round(m.wcu, 3))


def measure_paths(bench: paths.Bench, wanted: Iterable[PathBudget] = EXPECTED) -> list[PathResult]:
    results = []
    for budget in wanted:
        m = paths.run_scenario(bench, budget.key)
        results.append(PathResult(budget, to_budget(m), tuple(m.ops)))
    return results


def run(engine: str | None = None) -> CapacityRun:
    """Measure every path on DynamoDB Local when it is installed, else model it on moto.

    `engine` forces the choice ("dynamodb-local" or "moto").
    """
    missing = dynamodb_local_missing()
    chosen = engine or (MOTO if missing else DYNAMODB_LOCAL)
    with running(chosen) as started:
        factory = None
        if chosen == MOTO:
            factory = _modelled_factory(started.endpoint_url)
        bench = paths.Bench(create_table(started.endpoint_url), started.endpoint_url, factory)
        try:
            results = measure_paths(bench)
        finally:
            bench.close()
    source = MEASURED if chosen == DYNAMODB_LOCAL else MODELLED
    why = None if chosen == DYNAMODB_LOCAL else (missing or "moto chosen")
    return CapacityRun(source, chosen, tuple(results), why)


def _modelled_factory(endpoint_url: str) -> Callable[[], ModelledClient]:
    import boto3

    from zae_limiter.repository import client_kwargs

    def make() -> ModelledClient:
        client = boto3.session.Session().client("dynamodb", **client_kwargs(None, endpoint_url))
        return ModelledClient(client)

    return make
