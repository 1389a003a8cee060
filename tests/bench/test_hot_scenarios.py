"""The hot-entity scenarios' verdicts, on canned per-second rows (no engine)."""

from __future__ import annotations

from typing import Any

from benchmarks.hot_scenarios import Scenario, judge, scenario_markdown, target_shards

PER_PARTITION = Scenario("partition-5", 5, 40.0)
TABLE_LEVEL = Scenario("table-level", 50, 40.0, table_limit=20)


def rows(counts: list[int], offered: int = 40, unavailable_until: int = 3) -> list[dict[str, Any]]:
    return [
        {
            "second": i,
            "offered": offered,
            "attempted": offered,
            "admitted": offered if i >= unavailable_until else 5,
            "shard_count": count,
            "shard_items": count,
            "throttles": 0,
            "forwarded_writes": offered,
            "rejections": 0,
            "unavailable": 0 if i >= unavailable_until else offered - 5,
        }
        for i, count in enumerate(counts)
    ]


def test_target_is_the_smallest_power_of_two_under_80_percent() -> None:
    assert target_shards(40, 5) == 16  # 8 shards would run at 5/s: 100%
    assert target_shards(400, 50) == 16
    assert target_shards(30, 50) == 1
    assert target_shards(40, 50) == 2  # exactly 80% is not under it


def test_settling_at_the_target_or_one_more_passes() -> None:
    for final in (16, 32):
        verdict = judge(PER_PARTITION, rows([1, 2, 4, 8] + [final] * 11))
        assert verdict["never_past_allowed"] and verdict["max_shard_count"] == final
        assert verdict["convergence_second"] == 4
        assert verdict["unavailable_after_convergence"] == 0
        assert verdict["last_two_thirds"]["admitted_share_of_offered"] == 1.0


def test_overshooting_fails_even_if_it_comes_back() -> None:
    verdict = judge(PER_PARTITION, rows([1, 2, 4, 8, 16, 64, 16, 16, 16]))
    assert not verdict["never_past_allowed"]


def test_table_level_pressure_allows_no_doubling() -> None:
    assert judge(TABLE_LEVEL, rows([1] * 9))["never_past_allowed"]
    assert not judge(TABLE_LEVEL, rows([1, 1, 2, 2, 2]))["never_past_allowed"]


def test_the_report_has_the_per_second_table() -> None:
    facts = {"partition_limit": 5, "table_limit": None, "offered": 40.0, "max_shard_count": 4}
    run = {"seconds": rows([1, 2, 4]), "scenario": facts}
    text = "\n".join(scenario_markdown("partition-5", run))
    assert "40/s offered, 5 writes/s per partition, reserves off" in text
    assert "| 2 | 40 | 40 | 5 | 4 | 0 | 0 | 35 |" in text  # second, ..., unavailable
