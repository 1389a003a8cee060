"""The verdicts of the under-throttling bench (benchmarks/hot_throttle.py) on made-up rows:
a run that keeps its promises passes, each broken promise is named, and the command fails."""

from __future__ import annotations

from typing import Any

from benchmarks import hot_throttle


def rows(seconds: int = 30, **changes: dict[int, int]) -> list[dict[str, Any]]:
    out = []
    for s in range(seconds):
        row = dict.fromkeys(hot_throttle.COLUMNS, 0)
        row.update(second=s, attempted=40, admitted=40, shard_count=2)
        for column, by_second in changes.items():
            if s in by_second:
                row[column] = by_second[s]
        out.append(row)
    return out


def run_of(table: list[dict[str, Any]], p50: float = 0.3) -> dict[str, Any]:
    return {"seconds": table, "admitted_latency_ms": {"p50": p50, "p99": 5.0}}


def failed(name: str, run: dict[str, Any]) -> set[str]:
    run["checks"] = hot_throttle.judge(name, run, 30)
    return {f.split(":")[1].split("=")[0].strip() for f in hot_throttle.failures({name: run})}


def test_a_run_that_keeps_every_promise_passes() -> None:
    assert failed("defaults", run_of(rows())) == set()
    assert failed("reserve-off", run_of(rows(shard_count={0: 1, 1: 1, 2: 16}))) == set()


def test_each_broken_promise_of_the_defaults_is_named() -> None:
    assert failed("defaults", run_of(rows(admitted={0: 20}))) == {"admitted_share"}
    assert failed("defaults", run_of(rows(unavailable={6: 1}))) == {"unavailable_after_5s"}
    assert failed("defaults", run_of(rows(unavailable={4: 1}))) == set()  # the first 5 s
    assert failed("defaults", run_of(rows(shard_count={9: 8}))) == {"max_shards"}
    assert failed("defaults", run_of(rows(), p50=1.2)) == {"p50_admitted_ms"}
    assert failed("defaults", run_of(rows(throttles={7: 11}))) == {
        "emulator_throttles_per_s_after_5s"
    }


def test_each_broken_promise_without_reserves_is_named() -> None:
    growing = {0: 1, 1: 2, 2: 4, 3: 8, 4: 16}
    late = rows(shard_count=growing, unavailable={4: 9, 12: 1})
    assert failed("reserve-off", run_of(late)) == {"unavailable_after_settling"}
    assert failed("reserve-off", run_of(rows(shard_count={**growing, 5: 64}))) == {"max_shards"}
    short = rows(shard_count=growing, admitted={s: 30 for s in range(10, 30)})
    assert failed("reserve-off", run_of(short)) == {"admitted_share_last_20s"}
    slow = {0: 1, 5: 2, 8: 4, 10: 8, 11: 16}
    assert failed("reserve-off", run_of(rows(shard_count=slow))) == {"second_at_needed_shards"}
    chatty = run_of(rows(shard_count=growing))
    chatty["requests"] = {"UpdateItem": {"forwarded": 1200, "throttled": 1000}, "GetItem": {
        "forwarded": 300, "throttled": 0}}  # fmt: skip
    assert failed("reserve-off", chatty) == {"requests_per_admitted"}
    stormed = run_of(rows(shard_count=growing))
    stormed["summary"] = {"unavailable_codes": {"ReadTimeoutError": 3, "Timeout": 1}}
    assert failed("reserve-off", stormed) == {"timeouts"}
