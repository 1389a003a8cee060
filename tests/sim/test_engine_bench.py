"""The engine's bench runs (`python -m zae_limiter.sim.engine.bench`) and measures something.

How fast it is belongs to the bench's printed numbers (docs/simulator.md), never to a
test's assertion: a test on a shared machine would fail for the machine's sake.
"""

from zae_limiter.sim.engine import bench


def test_the_bench_runs_and_reports_a_rate() -> None:
    assert bench.main(["--count", "2000", "--rounds", "1"]) == 0
    assert bench.bench_take(200) > 0
