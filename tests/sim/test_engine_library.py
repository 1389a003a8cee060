"""The library itself running on the engine: the faces, flows and aggregator unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.sim.library_schedule import LASTING, ROOMY, Clock, run_schedule
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.aggregator.plan import AggregatorConfig
from zae_limiter.aggregator.processor import process
from zae_limiter.sim.engine import Engine, EngineClient
from zae_limiter.sim.engine import expressions as ex
from zae_limiter.sim.engine.replay import RecordingClient

RPM = Limit.per_minute("rpm", 100)
TPM = Limit.per_minute("tpm", 10_000)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(clock: Clock) -> Engine:
    return Engine(clock=clock)


@pytest.fixture
def open_limiter(engine: Engine, clock: Clock) -> Iterator[Any]:
    repos: list[SyncRepository] = []

    def make(**options: Any) -> SyncRateLimiter:
        repo = SyncRepository.open(
            name="t",
            create_table=True,
            client=EngineClient(engine),
            lean=False,
            clock=clock,
            **options,
        )
        repos.append(repo)
        return SyncRateLimiter(repo)

    yield make
    for repo in repos:
        repo.close()


def test_acquire_adjust_rollback_cascade_and_delete(open_limiter: Any, engine: Engine) -> None:
    lim = open_limiter(reserve=False)
    lim.create_entity("org")
    lim.create_entity("key", parent_id="org", cascade=True)
    lim.set_limits("key", [RPM, TPM], resource="gpt")
    lim.set_limits("org", [Limit.per_minute("rpm", 150)], resource="gpt")
    with lim.acquire("key", "gpt", {"rpm": 1, "tpm": 500}) as lease:
        lease.adjust(tpm=242)
        assert lim.available("key", "gpt") == {"rpm": 99, "tpm": 9_500}
    assert lim.available("key", "gpt") == {"rpm": 99, "tpm": 9_258}
    assert lim.available("org", "gpt") == {"rpm": 149}  # the cascade took from the parent
    with pytest.raises(RuntimeError), lim.acquire("key", "gpt", {"rpm": 5, "tpm": 700}):
        raise RuntimeError("upstream failed")
    assert lim.available("key", "gpt") == {"rpm": 99, "tpm": 9_258}
    shards = lim.get_shards("key", "gpt")
    assert [(s.shard_id, s.shard_count, s.tokens) for s in shards] == [
        (0, 1, {"rpm": 99, "tpm": 9_258})
    ]
    assert lim.delete_entity("key") >= 1
    assert not [i for i in engine.items("t") if "ENTITY#key" in i["PK"]["S"]]


def test_rejection_when_the_bucket_is_empty_and_refill_with_time(
    open_limiter: Any, clock: Clock
) -> None:
    lim = open_limiter(reserve=False)
    limits = [Limit.per_second("rps", 10)]
    for _ in range(10):
        with lim.acquire("e", "api", {"rps": 1}, limits=limits):
            pass
    with pytest.raises(RateLimitExceeded) as caught:
        with lim.acquire("e", "api", {"rps": 1}, limits=limits):
            pass
    assert caught.value.retry_after_seconds == pytest.approx(0.1, abs=0.01)
    clock.advance(0.1)
    with lim.acquire("e", "api", {"rps": 1}, limits=limits):
        pass


def test_reserves_serve_acquires_from_memory_and_go_back(open_limiter: Any, engine: Engine) -> None:
    lim = open_limiter(reserve=LASTING)
    writes_before = len(engine.records("t"))
    for _ in range(200):
        with lim.acquire("k", "gpt", {"rpm": 1, "tpm": 50}, limits=ROOMY):
            pass
    assert lim.get_reserve_stats().hits >= 150
    assert len(engine.records("t")) - writes_before < 40  # far fewer writes than acquires
    lim.repository.return_reserves(True)
    assert lim.available("k", "gpt", limits=ROOMY) == {"rpm": 59_800, "tpm": 5_990_000}
    assert sum(s.reserved.get("rpm", 0) for s in lim.get_shards("k", "gpt")) == 0


def test_the_aggregator_reads_the_engines_stream(
    open_limiter: Any, engine: Engine, clock: Clock
) -> None:
    lim = open_limiter(reserve=False)
    for _ in range(3):
        with lim.acquire("k", "gpt", {"rpm": 2}, limits=[RPM]):
            pass
    plan = process(engine.records("t"), AggregatorConfig(table="t"), clock())
    assert plan.failed == [] and plan.changes == 3
    for write in plan.writes:
        engine.call(write.call.op, write.call.params)
    summary = lim.get_usage_summary("k", "gpt")
    assert (summary.counters.get("rpm"), summary.total_events) == (6, 3)


def test_the_whole_schedule_runs_and_uses_top_level_names_only(
    engine: Engine, clock: Clock
) -> None:
    recorder = RecordingClient(EngineClient(engine))
    seen = run_schedule(recorder, clock)
    assert seen.values["after_adjust"] == {"rpm": 99, "tpm": 9_258}
    assert seen.values["after_rollback"] == {"rpm": 99, "tpm": 9_258}
    assert seen.rejected > 0
    assert seen.values["hot_shards"][0].shard_count == 2  # the partition limit doubled it
    assert seen.values["children"] == ["member"]  # relinked to the other team
    assert seen.values["entities"] == ["team", "member"]
    assert seen.values["resolved"].source == "entity_default"
    assert seen.values["wait"] == pytest.approx(30.0)  # 5 of 10 rpm: half a minute
    assert seen.values["namespaces"] == ["admin", "default"]
    assert seen.values["deleted_ns"] > 0 and seen.values["audit"] > 0
    records = engine.records("sim-conformance")
    assert len({r["dynamodb"]["SequenceNumber"] for r in records}) == len(records)
    # Every document path the library sends is one top-level name (nested paths are
    # supported, but only the unit tests exercise them).
    paths: set[tuple[Any, ...]] = set()
    for outcome in recorder.outcomes:
        for params in _bodies(outcome.params):
            for field, kind in EXPRESSIONS.items():
                if field in params:
                    _paths(ex.compiled(kind, params[field]).tree, paths)
    assert paths and all(len(path) == 1 for path in paths)


EXPRESSIONS = {
    "ConditionExpression": "condition",
    "UpdateExpression": "update",
    "KeyConditionExpression": "key",
    "FilterExpression": "filter",
    "ProjectionExpression": "projection",
}


def _bodies(params: dict[str, Any]) -> list[dict[str, Any]]:
    parts = [body for part in params.get("TransactItems") or [] for body in part.values()]
    return [params, *parts, *(params.get("RequestItems") or {}).values()]


def _paths(node: Any, found: set[tuple[Any, ...]]) -> None:
    if isinstance(node, dict):
        node = list(node.values())
    if isinstance(node, list):
        for child in node:
            _paths(child, found)
    elif isinstance(node, tuple) and node:
        if node[0] == "path":
            found.add(node[1])
        else:
            for child in node[1:]:
                _paths(child, found)


async def test_the_async_face_runs_on_the_engine_too(engine: Engine, clock: Clock) -> None:
    from zae_limiter import RateLimiter, Repository
    from zae_limiter.sim.engine import AsyncEngineClient

    repo = await Repository.open(
        name="t", create_table=True, client=AsyncEngineClient(engine), clock=clock, reserve=False
    )
    try:
        lim = RateLimiter(repo)
        async with lim.acquire("a", "gpt", {"rpm": 3}, limits=[RPM]) as lease:
            await lease.adjust(rpm=1)
        assert await lim.available("a", "gpt", limits=[RPM]) == {"rpm": 96}
    finally:
        await repo.close()
