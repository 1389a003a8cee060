"""Issue 35 on DynamoDB Local: a 2 -> 1 merge, the drained shard refilled, and a doubling
back by the aggregator or a client (tests/integration/test_aggregator.py), whose check
deletes the drained shard under a condition on its count and full-at times as read
(`keys.delete_drained`); and that condition refusing a delete once a write landed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._servers import EngineEndpoint
from tests.conftest import Clock
from tests.integration import test_aggregator as aggregator
from zae_limiter import SyncRateLimiter, SyncRepository, keys

pytestmark = pytest.mark.engine


@pytest.fixture
def limiter(
    dynamodb_local: EngineEndpoint, table_name: str, clock: Clock
) -> Iterator[SyncRateLimiter]:
    repo = SyncRepository.open(
        name=table_name, endpoint_url=dynamodb_local.url, create_table=True, clock=clock
    )
    yield SyncRateLimiter(repo)
    repo.close()


@pytest.mark.parametrize("doubler", ["aggregator", "client", "throttled client"])
def test_a_doubling_back_creates_no_tokens_on_dynamodb_local(
    limiter: SyncRateLimiter, table_name: str, clock: Clock, doubler: str
) -> None:
    aggregator.test_a_doubling_back_over_a_refilled_drained_shard_creates_no_tokens(
        limiter, table_name, clock, doubler
    )


def test_the_delete_of_a_drained_shard_is_refused_once_a_write_landed(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    client = limiter.repository._runner.client
    now = clock.now_ms
    drained = aggregator._shard_item(1, 1, 0, now)
    client.put_item(TableName=table_name, Item=drained)
    key = keys.bucket_key("default", "hot", "api", 1)
    client.update_item(  # a give-back lands after the read
        TableName=table_name, Key=key, UpdateExpression="ADD b_rpm_fa :back",
        ExpressionAttributeValues={":back": keys.n(-1000)},
    )  # fmt: skip
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.delete_item(**keys.delete_drained(table_name, drained))
    seen = client.get_item(TableName=table_name, Key=key, ConsistentRead=True)["Item"]
    client.delete_item(**keys.delete_drained(table_name, seen))
    assert "Item" not in client.get_item(TableName=table_name, Key=key, ConsistentRead=True)
