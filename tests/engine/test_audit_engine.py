"""Audit events on real endpoints: moto's server answers STS, DynamoDB Local does not (the
principal then comes from the access key, and the change is still made); the transaction's
condition on the state read is enforced by the engine itself."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tests._servers import EngineEndpoint
from zae_limiter import (
    Limit,
    RateLimiter,
    Repository,
    SyncRateLimiter,
    SyncRepository,
)

RPM = Limit.per_minute("rpm", 100)


def open_sync(engine: EngineEndpoint, table: str, **options: Any) -> SyncRateLimiter:
    return SyncRateLimiter(
        SyncRepository.open(name=table, endpoint_url=engine.url, create_table=True, **options)
    )


def test_principal_from_sts_or_from_the_access_key(engine_env: EngineEndpoint) -> None:
    table = f"audit-{uuid.uuid4().hex[:8]}"
    limiter = open_sync(engine_env, table)
    limiter.create_entity("acme")
    limiter.set_limits("acme", [RPM])
    principals = {e.principal for e in limiter.get_audit_events("acme")}
    if engine_env.engine == "moto":
        assert len(principals) == 1 and principals.pop().startswith("arn:aws:sts::")
    else:  # DynamoDB Local serves no STS: the change is made all the same
        assert principals == {f"access-key:{engine_env.env['AWS_ACCESS_KEY_ID']}"}
    assert limiter.get_limits("acme") == (RPM,)
    limiter.repository.close()


def test_async_face_records_events_too(engine_env: EngineEndpoint) -> None:
    table = f"audit-{uuid.uuid4().hex[:8]}"

    async def body() -> list[str]:
        repo = await Repository.open(name=table, endpoint_url=engine_env.url, create_table=True)
        async with repo:
            limiter = RateLimiter(repo)
            await limiter.create_entity("acme")
            await limiter.update_entity("acme", name="Acme")
            await limiter.set_resource_defaults("gpt-4", [RPM])
            return [e.action for e in await limiter.get_audit_events()]

    assert asyncio.run(body()) == ["create_entity", "update_entity", "set_limits"]


def test_the_engine_refuses_a_change_made_on_a_stale_read(engine_env: EngineEndpoint) -> None:
    """A second writer slips in between our read and our transaction; the engine fails the
    transaction's condition, we read again, and "before" is what we really replaced."""
    table = f"audit-{uuid.uuid4().hex[:8]}"
    ours = open_sync(engine_env, table, principal="ours")
    theirs = open_sync(engine_env, table, principal="theirs")
    ours.create_entity("acme")
    ours.set_limits("acme", [RPM])
    slipped: list[bool] = []

    def slip_in(**_kwargs: Any) -> None:
        if not slipped:
            slipped.append(True)
            theirs.set_limits("acme", [Limit.per_minute("rpm", 7)])

    ours.repository.client.meta.events.register("before-call.dynamodb.TransactWriteItems", slip_in)
    ours.set_limits("acme", [Limit.per_minute("rpm", 9)])
    events = ours.get_audit_events("acme")
    last = [e for e in events if e.principal == "ours"][-1]
    assert last.before is not None and last.before["limits"][0]["capacity"] == 7
    assert ours.get_limits("acme")[0].capacity == 9
    assert [e.principal for e in events].count("theirs") == 1
    for limiter in (ours, theirs):
        limiter.repository.close()


@pytest.mark.parametrize("entities", [30])
def test_namespace_delete_leaves_other_namespaces(
    engine_env: EngineEndpoint, entities: int
) -> None:
    table = f"audit-{uuid.uuid4().hex[:8]}"
    doomed = open_sync(engine_env, table)
    kept = SyncRateLimiter(SyncRepository.open("kept", name=table, endpoint_url=engine_env.url))
    for limiter in (doomed, kept):
        for i in range(entities if limiter is doomed else 2):
            limiter.create_entity(f"e{i}")
            with limiter.acquire(f"e{i}", "gpt-4", {"rpm": 1}, limits=[RPM]):
                pass
    before = kept.namespace_info()
    seen: list[tuple[int, int]] = []
    deleted = doomed.delete_namespace(
        "default", wcu_per_second=1_000_000, on_progress=lambda d, t: seen.append((d, t))
    )
    assert deleted == 3 * entities  # entity, bucket shard, audit event each
    assert seen[-1] == (deleted, deleted) and len(seen) == -(-deleted // 25)
    assert doomed.namespace_info().total == 0
    assert kept.namespace_info() == before
    assert doomed.list_namespaces() == ["kept"]
    for limiter in (doomed, kept):
        limiter.repository.close()
