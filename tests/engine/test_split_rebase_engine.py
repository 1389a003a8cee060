"""A rebase that carries the split snapshot with it, on DynamoDB Local: the schedule of
tests/integration/test_split_rebase.py (the simulator's seed 4330), and the write it
adds (SET `sf` under the `sf` read) alone and under a riding doubling, whose own snapshot
replaces it (one SET per attribute, no value left unused: DynamoDB rejects both)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.conftest import Clock
from tests.integration import test_split_rebase as directed
from zae_limiter import SyncRateLimiter, SyncRepository, keys
from zae_limiter.flows.write.levels import Level, WritePlan
from zae_limiter.flows.write.plan import plan_write

pytestmark = pytest.mark.engine


@pytest.fixture
def repo(dynamodb_local: EngineEndpoint, clock: Clock) -> Iterator[SyncRepository]:
    opened = SyncRepository.open(
        name=unique_name(), endpoint_url=dynamodb_local.url, create_table=True, clock=clock
    )
    yield opened
    opened.close()


def test_the_schedule_on_dynamodb_local(repo: SyncRepository, clock: Clock) -> None:
    directed.rebase_then_split(SyncRateLimiter(repo), clock)


@pytest.mark.parametrize("doubling", [False, True], ids=["rebase", "rebase-that-doubles"])
def test_a_rebase_writes_the_snapshot_in_the_new_numbers(
    repo: SyncRepository, clock: Clock, doubling: bool
) -> None:
    client, table, now = repo._runner.client, repo.table_name, clock.now_ms
    item = directed._shard0(90_000, 10_000, now)
    client.put_item(TableName=table, Item=item)
    level = Level("hot", "api", (directed.NEW,), {"tpm": 1000}, shard_count=2)
    key = keys.bucket_key("default", "hot", "api", 0)
    plan = plan_write(keys.decode_bucket(item), level, now, table, key)
    assert isinstance(plan, WritePlan)
    params = plan.params
    if doubling:
        params = keys.with_doubling(params, 2, 4, now, now)
    after = client.update_item(**params)["Attributes"]
    stored = keys.decode_bucket(after)
    fa = stored.limits["tpm"]
    assert fa.capacity_milli == 497_000 and fa.tokens(now, 2 * (1 + doubling)) >= 0
    snapshot = stored.split_full_at["tpm"]
    if doubling:  # the raise snapshots shard 0 as the write leaves it
        assert snapshot == fa.full_at
    else:  # the shares not split off yet keep their 10 tokens under the new numbers
        assert replace(fa, full_at=snapshot).tokens(now, 2) == 10_000
