"""Several regions in one schedule (sim/regions.py): one engine per region, a replicator
that copies every change after a lag, last writer wins per item, and partitions.

What the configuration shows today, before regional shares (issue 36) exist: one region
serving clients and the others replicas end alike and break no guarantee; clients in two
regions writing the same buckets over-admit, as independent counters do.
"""

from __future__ import annotations

import logging

import pytest

from tests.mutants import mutant
from zae_limiter.sim.backends import regions_backend
from zae_limiter.sim.regions import Replication
from zae_limiter.sim.run import run_schedule

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")
SEEDS = range(30)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)


def _failures(seeds: range, active: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    out = []
    for seed in seeds:
        outcome = run_schedule(seed, regions_backend(REGIONS), regions=REGIONS, active=active)
        if outcome.failed:
            out.append((seed, str(outcome.violations[0])))
    return out


def test_one_serving_region_replicates_and_breaks_no_guarantee() -> None:
    assert _failures(SEEDS, active=REGIONS[:1]) == []


def test_replicas_that_never_receive_the_changes_are_found() -> None:
    """Mutant: a replicator that reads the streams and delivers nothing."""
    with mutant(Replication, "deliver", lambda self, now_ms, lag_ms=None: 0), \
         mutant(Replication, "settle", lambda self, now_ms: None):  # fmt: skip
        found = _failures(range(5), active=REGIONS[:1])
    assert found and all("replicas differ" in detail for _seed, detail in found)


def test_clients_of_two_regions_on_one_bucket_over_admit() -> None:
    """Last writer wins per item loses one region's write: independent counters, the
    over-admission regional shares exist to prevent (docs/global.md)."""
    found = _failures(SEEDS)
    assert any("over-admission" in d or "tokens created" in d for _s, d in found), found


def test_a_world_of_regions_replays_alike() -> None:
    def run() -> object:
        return run_schedule(7, regions_backend(REGIONS), regions=REGIONS, traced=True).trace

    assert run() == run()


def test_partitions_are_drawn_and_heal() -> None:
    faults: dict[str, int] = {}
    for seed in range(40):
        outcome = run_schedule(seed, regions_backend(REGIONS), regions=REGIONS)
        for kind, count in outcome.counts.faults.items():
            faults[kind] = faults.get(kind, 0) + count
    assert faults.get("partition", 0) > 0
