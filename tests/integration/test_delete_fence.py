"""Deleting a sharded entity while clients still use it (docs/cli.md, `entity delete`):
the deletion fences shard 0, so no client can make a shard of the entity afterwards, and
deletes every shard below shard 0's count by key (flows/records/entities.py,
`delete_buckets`). On moto in-process; the simulator's seeds 3746 and 5427 found it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Clock
from tests.integration.test_aggregator import _shard_item, _shard_items
from zae_limiter import SyncRateLimiter, SyncRepository, keys
from zae_limiter.flows.records import entities


@pytest.fixture
def limiter(table_name: str, clock: Clock) -> Iterator[SyncRateLimiter]:
    from moto import mock_aws

    with mock_aws():
        repo = SyncRepository.open(name=table_name, create_table=True, clock=clock)
        yield SyncRateLimiter(repo)
        repo.close()


def _put(limiter: SyncRateLimiter, *items: dict[str, Any]) -> None:
    for item in items:
        limiter.repository._runner.client.put_item(
            TableName=limiter.repository.table_name, Item=item
        )


def test_a_shard_the_deletion_query_did_not_list_is_deleted(
    limiter: SyncRateLimiter, clock: Clock
) -> None:
    """A shard made just before the deletion looked (an index lags) goes too: every
    shard below the count shard 0 has when it is fenced is deleted by key."""
    now = clock.now_ms
    _put(limiter, _shard_item(0, 2, 50_000, now), _shard_item(1, 2, 50_000, now))
    found = [keys.bucket_key("default", "hot", "api", 0)]
    limiter.repository.run(entities.delete_buckets(limiter.repository.state, "hot", found))
    assert _shard_items(limiter, "hot", "api", 4) == {}


def test_no_shard_is_made_once_the_deletion_fenced_shard_0(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """A client that read shard 0 before the deletion makes its shard only in a
    transaction that checks shard 0 still stands unfenced."""
    now = clock.now_ms
    _put(limiter, _shard_item(0, 4, 50_000, now))
    client = limiter.repository._runner.client
    shard0 = keys.bucket_key("default", "hot", "api", 0)

    def make(shard: int) -> dict[str, Any]:
        item = _shard_item(shard, 4, 50_000, now)
        return keys.create_split_bucket(table_name, item, shard0, 4)  # type: ignore[no-any-return]

    client.transact_write_items(**make(1))  # before the deletion: made
    client.update_item(**keys.mark_deleting(table_name, shard0))
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(**make(2))
    assert sorted(_shard_items(limiter, "hot", "api", 4)) == [0, 1]


def stop_after_the_mark(flow: Any) -> Any:
    """A deletion whose process dies once its mark on shard 0 is written."""
    send: Any = None
    while True:
        request = flow.send(send)
        send = yield request
        if getattr(request, "params", {}).get("UpdateExpression") == "SET #deleting = :yes":
            flow.close()
            raise KeyboardInterrupt("the process died")


def acquires_refused(limiter: SyncRateLimiter, n: int = 40) -> list[str]:
    from zae_limiter import Limit, RateLimiterUnavailable

    refused = []
    for _ in range(n):  # each lands on one of the entity's shards
        try:
            with limiter.acquire("hot", "api", {"rpm": 1}, limits=[Limit.per_minute("rpm", 600)]):
                pass
        except RateLimiterUnavailable as error:
            refused.append(str(error))
    return refused


def test_a_deletion_that_stopped_after_its_mark_is_finished_by_deleting_again(
    limiter: SyncRateLimiter, clock: Clock
) -> None:
    """A deletion whose process died after it marked shard 0 (the record and configs
    already gone) left an entity of 4 shards, 2 of them made, that could never make the
    other 2: every acquire sent there is refused, and the refusal says what finishes it.
    Deleting again does, although the record is gone; the acquires after are all served."""
    now = clock.now_ms
    limiter.create_entity("hot")
    _put(limiter, _shard_item(0, 4, 150_000, now), _shard_item(1, 4, 150_000, now))
    with pytest.raises(KeyboardInterrupt):
        limiter.repository.run(stop_after_the_mark(limiter._ops.delete_entity("hot")))
    assert limiter.get_entity("hot") is None
    refused = acquires_refused(limiter)
    assert refused and all("`zae-limiter entity delete hot` finishes it" in r for r in refused)
    limiter.delete_entity("hot")
    assert _shard_items(limiter, "hot", "api", 4) == {}
    assert acquires_refused(limiter) == []


def test_a_late_delete_of_shard_0_spares_a_fresh_one(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """Two deleters (a deletion, and a client finishing it): the last write of the one
    that comes second finds a fresh, unmarked shard 0 and leaves it."""
    now = clock.now_ms
    _put(limiter, _shard_item(0, 1, 50_000, now))
    shard0 = keys.bucket_key("default", "hot", "api", 0)
    client = limiter.repository._runner.client
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.delete_item(**keys.delete_marked(table_name, shard0))
    assert sorted(_shard_items(limiter, "hot", "api", 1)) == [0]
