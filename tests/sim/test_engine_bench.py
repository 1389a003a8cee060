"""The bench runs, and the engine is fast enough for the simulator."""

from __future__ import annotations

from zae_limiter.sim.engine import bench


def test_the_bench_runs_and_clears_the_simulators_floor() -> None:
    assert bench.main(["--count", "2000", "--rounds", "1"]) == 0
    # 2,000 ops/s is the simulator's floor; the machine may be shared, so no more than it.
    assert bench.bench_take(2000) > 2_000
