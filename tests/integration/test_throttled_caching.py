"""A failed acquire leaves the entity and its configs cached, as a successful one does.

Every write to the entity's bucket is throttled (DynamoDB's own error, injected through
botocore's event hooks on the real client, on moto): the capacity meter records the
operations each acquire sends, and none of them re-reads the configs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from tests.conftest import Clock
from zae_limiter import Limit, RateLimiterUnavailable, SyncRateLimiter, SyncRepository
from zae_limiter.flows.scaling.throttled import MAX_THROTTLED_WAITS

RPM = Limit.per_minute("rpm", 600)
HOT = "default/BUCKET#key-1#gpt#0"


def throttle_bucket_writes(repo: SyncRepository) -> None:
    def refuse(params: dict[str, Any], model: Any, **_: Any) -> Any:
        body = json.loads(params.get("body") or b"{}")
        if (
            model.name in ("UpdateItem", "PutItem")
            and body.get("Key", body.get("Item", {})).get("PK", {}).get("S") == HOT
        ):
            error = {"Error": {"Code": "ProvisionedThroughputExceededException"}}
            return AWSResponse("http://x", 400, {}, None), error
        return None

    repo._runner.client.meta.events.register("before-call.dynamodb.*", refuse)


@pytest.fixture
def fresh_client(clock: Clock) -> Iterator[SyncRateLimiter]:
    """A client that has never seen key-1, whose stored limits and bucket exist."""
    with mock_aws():
        admin = SyncRateLimiter(SyncRepository.open(name="t", create_table=True, clock=clock))
        admin.set_limits("key-1", [RPM], resource="gpt")
        with admin.acquire("key-1", "gpt", {"rpm": 1}):
            pass
        repo = SyncRepository.open(name="t", clock=clock, max_shards=1)
        throttle_bucket_writes(repo)
        yield SyncRateLimiter(repo)
        repo.close()
        admin.repository.close()


def test_throttled_acquires_read_the_configs_once(
    fresh_client: SyncRateLimiter, clock: Clock
) -> None:
    limiter = fresh_client
    meter = limiter.repository.meter
    throttles = meter.throttles
    with meter.measure() as measured:
        for _ in range(10):
            with pytest.raises(RateLimiterUnavailable) as raised:
                with limiter.acquire("key-1", "gpt", {"rpm": 1}):
                    pass
            assert raised.value.throttled
            clock.advance(0.1)
    # One config read (with shard 0's item) for the first acquire; every acquire sent its
    # write, the first also its few retries after short waits, the later ones held back
    # first (the bucket's gate in this client, flows/scaling/throttled.py) and so sent fewer. The
    # meter counts each as a throttle (they consumed nothing).
    assert measured.ops == ["batch_get_item"]
    sent = meter.throttles - throttles
    assert 10 + MAX_THROTTLED_WAITS <= sent < 10 * (1 + MAX_THROTTLED_WAITS)


def test_the_entity_is_known_after_a_throttled_first_acquire(
    fresh_client: SyncRateLimiter,
) -> None:
    limiter = fresh_client
    with pytest.raises(RateLimiterUnavailable):
        with limiter.acquire("key-1", "gpt", {"rpm": 1}):
            pass
    assert "key-1" in limiter.repository.state.entities
