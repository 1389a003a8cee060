"""Bucket expiry and scheduled limits on DynamoDB Local: the writes that move, remove and
create a bucket's `ttl` are accepted by AWS's own engine (moto accepts some requests
DynamoDB refuses), and a speculative acquire still costs 1 WCU with its `ttl`."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Limit, SyncRateLimiter, SyncRepository, keys

pytestmark = pytest.mark.engine

HOURLY = Limit.per_hour("rph", 1000)


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_800_000_000_000  # 2027-01-15 08:00 UTC

    def __call__(self) -> int:
        return self.now_ms


def _items(url: str, name: str, entity: str) -> dict[int, dict[str, Any]]:
    ddb = boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1")
    found = {}
    for shard in range(4):
        key = keys.bucket_key("default", entity, "api", shard)
        item = ddb.get_item(TableName=name, Key=key, ConsistentRead=True).get("Item")
        if item:
            found[shard] = item
    return found


def test_ttl_writes_on_dynamodb_local(dynamodb_local: EngineEndpoint) -> None:
    name, clock = unique_name(), Clock()
    repo = SyncRepository.open(name=name, endpoint_url=dynamodb_local.url, create_table=True,
                               reserve=False, clock=clock, partition_wcu=10)  # fmt: skip
    limiter = SyncRateLimiter(repo)
    with limiter.acquire("e", "api", {"rph": 1}, limits=[HOURLY]):  # created with a ttl
        pass
    first = keys.expiry_of(_items(dynamodb_local.url, name, "e")[0])
    assert first == (clock.now_ms + 3_600_000) // 1000 + 86_400
    clock.now_ms += 10_000
    with repo.meter.measure() as m:  # the speculative take moves it, still 1 WCU
        with limiter.acquire("e", "api", {"rph": 1}, limits=[HOURLY]) as lease:
            lease.adjust(rph=5000)  # a charge into debt moves it past the debt's refill
    assert m.ops == ["update_item", "update_item"] and m.wcu == 2
    charged = keys.expiry_of(_items(dynamodb_local.url, name, "e")[0])
    assert charged == (clock.now_ms + 3_600_000 + 5000 * 3_600) // 1000 + 86_400
    # A hot entity doubles: the count raise removes the ttl, the new shard has none.
    limits = [Limit.per_minute("rpm", 6000)]
    for _ in range(40):
        clock.now_ms += 40
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
    for _ in range(20):
        clock.now_ms += 110
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
    shards = _items(dynamodb_local.url, name, "hot")
    assert len(shards) >= 2 and all(keys.TTL not in item for item in shards.values())
    repo.close()


def test_a_schedule_boundary_rebases_on_dynamodb_local(dynamodb_local: EngineEndpoint) -> None:
    name, clock = unique_name(), Clock()
    repo = SyncRepository.open(name=name, endpoint_url=dynamodb_local.url, create_table=True,
                               reserve=False, clock=clock)  # fmt: skip
    limiter = SyncRateLimiter(repo)
    nine = 1_800_003_600_000
    rpm = Limit.per_minute("rpm", 10).during("0 9 * * *", "0 10 * * *", Limit.per_minute("rpm", 50))
    limiter.set_limits("e", [rpm], resource="api")
    clock.now_ms = nine - 10_000
    for _ in range(10):
        with limiter.acquire("e", "api", {"rpm": 1}):
            pass
    clock.now_ms = nine + 6_000  # 1.67 tokens by the day's numbers, then 5 by the rush's
    assert limiter.available("e", "api") == {"rpm": 6}
    with limiter.acquire("e", "api", {"rpm": 6}):  # the REBASE write, accepted
        pass
    assert limiter.available("e", "api") == {"rpm": 0}
    repo.close()
