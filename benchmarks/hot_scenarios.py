"""Hot-entity scenarios: is the shard count the one the rule promises?

Sharding alone (token reserves off), each scenario judged on its per-second rows: with
writes limited per partition key (5/s, then 50/s) and 8x that offered, the shard count
must settle at the smallest power of two that keeps every shard under 80% of the limit,
or one more, and never pass it; with the whole table limited below one partition's
rate, it must not double at all (more shards would only add writes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from benchmarks.hot_phase import COLUMNS, convergence, run_phase
from zae_limiter.limits import Limit
from zae_limiter.testing.emulator import PartitionEmulator
from zae_limiter.testing.load import Phase


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    partition_limit: int
    offered: float
    #: The emulator's limit on the whole table (writes/s), or None: per partition only.
    table_limit: int | None = None


SCENARIOS = (
    Scenario("partition-5", 5, 40.0),
    Scenario("partition-50", 50, 400.0),
    Scenario("table-level", 50, 40.0, table_limit=20),
)
SCENARIO_NAMES = tuple(s.name for s in SCENARIOS)


def target_shards(offered: float, partition_limit: int, threshold: float = 0.8) -> int:
    """The smallest power of two that keeps every shard under `threshold` of its limit."""
    count = 1
    while offered / count >= threshold * partition_limit:
        count *= 2
    return count


def judge(scenario: Scenario, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The scenario's promises, checked on its per-second rows."""
    tail = rows[len(rows) // 3 :]
    converged = convergence(rows)
    after = [r for r in rows if converged is not None and r["second"] >= converged]
    if scenario.table_limit is None:
        target = target_shards(scenario.offered, scenario.partition_limit)
        allowed = 2 * target  # "or one more": a burst may add one doubling, never two
    else:
        target = allowed = 1  # table-level pressure: more shards would only add writes
    offered = sum(r["offered"] for r in tail)
    return {
        "target_shard_count": target,
        "allowed_shard_count": allowed,
        "max_shard_count": max((r["shard_count"] for r in rows), default=0),
        "never_past_allowed": all(r["shard_count"] <= allowed for r in rows),
        "last_two_thirds": {
            "offered": offered,
            "attempted": sum(r["attempted"] for r in tail),
            "admitted": sum(r["admitted"] for r in tail),
            "admitted_share_of_offered": round(
                sum(r["admitted"] for r in tail) / max(1, offered), 4
            ),
            "unavailable": sum(r["unavailable"] for r in tail),
        },
        "convergence_second": converged,
        "unavailable_after_convergence": sum(r["unavailable"] for r in after),
    }


def run_scenario(
    emu: PartitionEmulator,
    upstream: str,
    table: str,
    scenario: Scenario,
    seconds: float,
    processes: int,
) -> dict[str, Any]:
    emu.writes_per_second = scenario.partition_limit
    emu.table_writes_per_second = scenario.table_limit
    roomy = Limit.per_second("rps", 100 * int(scenario.offered))
    phase = Phase(
        scenario.name,
        f"hot-{scenario.name}",
        seconds,
        scenario.offered,
        roomy,
        scenario.partition_limit,
        pinned=False,
        reserve=False,
    )
    try:
        result = run_phase(emu, upstream, table, phase, processes)
    finally:
        emu.table_writes_per_second = None
    result["scenario"] = {
        "partition_limit": scenario.partition_limit,
        "table_limit": scenario.table_limit,
        "offered": scenario.offered,
        **judge(scenario, result["seconds"]),
    }
    return result


def scenario_markdown(name: str, run: dict[str, Any]) -> list[str]:
    facts = run["scenario"]
    table = facts["table_limit"]
    where = f", the whole table at {table} writes/s" if table else ""
    lines = [
        f"## scenario {name}: {facts['offered']:.0f}/s offered, "
        f"{facts['partition_limit']} writes/s per partition{where}, reserves off",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---:|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in run["seconds"]]
    shown = {k: v for k, v in facts.items() if k not in ("partition_limit", "table_limit")}
    return [*lines, "", "```json", json.dumps(shown, indent=2), "```"]
