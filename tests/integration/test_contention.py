"""Exactness under contention: 8 processes x 300 acquires against one DynamoDB Local.

Capacity 1,000 and a refill too slow to matter: exactly 1,000 must be admitted, never
more, with speculative writes on and off, with and without cascade (where the parent's
capacity is the binding one).
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Iterator

import pytest

from tests._servers import (
    DYNAMODB_LOCAL_SKIP,
    EngineEndpoint,
    dynamodb_local_missing,
    start_dynamodb_local,
    unique_name,
)
from tests.integration import _contention_worker as worker
from zae_limiter import Limit, SyncRateLimiter, SyncRepository

PROCESSES = 8
ATTEMPTS = 300


@pytest.fixture(scope="module")
def server() -> Iterator[EngineEndpoint]:
    # moto's server applies concurrent UpdateItems to one item without a lock and was
    # seen to admit 1,003 of 1,000 under cascade load; exactness needs AWS's own engine.
    missing = dynamodb_local_missing()
    if missing:
        pytest.skip(f"{DYNAMODB_LOCAL_SKIP} ({missing})")
    endpoint, stop = start_dynamodb_local()
    yield endpoint
    stop()


@pytest.mark.slow
@pytest.mark.parametrize("speculative", [True, False], ids=["speculative", "read-write"])
@pytest.mark.parametrize("cascade", [False, True], ids=["flat", "cascade"])
def test_exactly_capacity_is_admitted(
    server: EngineEndpoint, speculative: bool, cascade: bool
) -> None:
    table = unique_name()
    repo = SyncRepository.open(name=table, endpoint_url=server.url, create_table=True)
    limiter = SyncRateLimiter(repo)
    entity = "key-1"
    if cascade:
        limiter.create_entity("proj-1")
        limiter.create_entity(entity, parent_id="proj-1", cascade=True)
        # The child could take 5,000: the parent's 1,000 binds.
        limiter.set_limits(entity, [Limit.custom("rpm", 5 * worker.CAPACITY, 1, 3600)], "api")
        limiter.set_limits("proj-1", worker.LIMITS, "api")
    else:
        limiter.set_limits(entity, worker.LIMITS, "api")
    counts = _contend(server, table, entity, speculative)
    total = {k: sum(c[k] for c in counts) for k in worker.OUTCOMES}
    assert sum(total.values()) == PROCESSES * ATTEMPTS, total
    # Attempts that were unavailable (lost races, a slow engine) took nothing; the rest
    # still drain the bucket exactly: 2,400 attempts for 1,000 tokens leave room for them.
    assert total["unavailable"] < PROCESSES * ATTEMPTS - worker.CAPACITY, total
    assert total["admitted"] == worker.CAPACITY, total
    binding = "proj-1" if cascade else entity
    assert limiter.available(binding, "api") == {"rpm": 0}
    if cascade:
        # Every admission took from both levels; every rejection gave the child back.
        assert limiter.available(entity, "api") == {"rpm": 4 * worker.CAPACITY}
    repo.close()


@pytest.mark.slow
@pytest.mark.parametrize("speculative", [True, False], ids=["speculative", "read-write"])
def test_a_refilling_limit_admits_no_more_than_an_ideal_bucket(
    server: EngineEndpoint, speculative: bool
) -> None:
    """The same 8 x 300, on a limit of 1,000 that refills 20 a second while they contend:
    an ideal bucket over the run's span (full at its start, refilled since) admits the
    capacity and the refill. The demand outruns the refill all along (2,400 attempts in a
    few seconds), so the ideal bucket is drained at every moment after the first
    thousand: the limiter may admit up to what it refilled, never more."""
    table = unique_name()
    repo = SyncRepository.open(name=table, endpoint_url=server.url, create_table=True)
    limiter = SyncRateLimiter(repo)
    entity = "key-refill"
    limiter.set_limits(entity, worker.REFILLING, "api")
    parts = _contend(server, table, entity, speculative)
    total = {k: sum(p[k] for p in parts) for k in worker.OUTCOMES}
    assert sum(total.values()) == PROCESSES * ATTEMPTS, total
    span = max(p["ended"] for p in parts) - min(p["started"] for p in parts)
    refilled = worker.REFILL_PER_S * span
    ideal = worker.CAPACITY + math.floor(refilled)
    assert total["rejected"] > 0, total  # the limit bound: the refill was all there was
    assert total["admitted"] <= ideal + 1, (total, span)
    # Not far under it either: what an acquire that lost its races did not take, and the
    # reserves still held when the last processes ended, stay in the bucket.
    assert total["admitted"] >= ideal - worker.REFILL_PER_S - PROCESSES, (total, span)
    repo.close()


def _contend(
    server: EngineEndpoint, table: str, entity: str, speculative: bool
) -> list[dict[str, float]]:
    """PROCESSES spawned clients, ATTEMPTS acquires each: what each one counted."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(PROCESSES) as pool:
        jobs = [(server.url, table, entity, ATTEMPTS, speculative)] * PROCESSES
        return list(pool.starmap(worker.run, jobs))
