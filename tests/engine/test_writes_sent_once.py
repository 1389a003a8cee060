"""Writes sent once, on DynamoDB Local (docs/resilience.md, "Writes sent once").

A boto3 client of the user's own keeps botocore's retries. A rollback's give-back that
DynamoDB applied but whose answer was lost must not be sent again by it: issue 35 found
11 admitted of 10 that way. The answer is lost here for real: a `before-send` handler on
the user's client sends the request to DynamoDB Local itself, then raises the read
timeout botocore raises when an answer never comes (and retries on, in every mode).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import urllib3
from botocore.exceptions import ReadTimeoutError

from tests._servers import EngineEndpoint, unique_name
from tests.mutants import mutant
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository, drivers

pytestmark = pytest.mark.engine

#: Ten tokens that never refill within the test.
LIMIT = Limit.custom("rpm", 10, 1, 366 * 86400 - 1)


class AnswerLost:
    """`before-send` handler: the first give-back (a write that lowers usage) reaches
    DynamoDB, and its answer is lost."""

    def __init__(self) -> None:
        self.http = urllib3.PoolManager()
        self.lost = 0

    def __call__(self, request: Any, **_: Any) -> None:
        body = json.loads(request.body or b"{}")
        values = body.get("ExpressionAttributeValues", {})
        gives_back = any(k.startswith(":used") and v.get("N", "").startswith("-")
                         for k, v in values.items())  # fmt: skip
        if not gives_back or self.lost:
            return
        self.lost += 1
        answer = self.http.request(
            request.method, request.url, body=request.body, headers=dict(request.headers)
        )
        assert answer.status == 200, answer.data
        raise ReadTimeoutError(endpoint_url=request.url)


@pytest.fixture
def user_client(dynamodb_local: EngineEndpoint) -> Iterator[Any]:
    client = boto3.client("dynamodb", **{**dynamodb_local.client_kwargs(), "config": None})
    yield client
    client.close()


def _admitted_with_a_lost_give_back(client: Any) -> tuple[int, int]:
    """(tokens admitted of the bucket's 10, give-backs whose answer was lost)."""
    hook = AnswerLost()
    client.meta.events.register("before-send.dynamodb.UpdateItem", hook)
    name = unique_name()
    repo = SyncRepository.open(name=name, create_table=True, client=client, lean=False,
                               reserve=False, timeout=10)  # fmt: skip
    limiter = SyncRateLimiter(repo)
    admitted = 0
    for _ in range(5):  # half spent: a give-back is not lost to a full bucket's clamp
        with limiter.acquire("k", "api", {"rpm": 1}, limits=[LIMIT]):
            admitted += 1
    with pytest.raises(RuntimeError), limiter.acquire("k", "api", {"rpm": 1}, limits=[LIMIT]):
        raise RuntimeError("the guarded call failed: the lease gives its token back")
    for _ in range(20):
        try:
            with limiter.acquire("k", "api", {"rpm": 1}, limits=[LIMIT]):
                admitted += 1
        except RateLimitExceeded:
            break
    repo.close()
    return admitted, hook.lost


def test_a_give_back_whose_answer_is_lost_is_not_sent_again(user_client: Any) -> None:
    assert user_client.meta.config.retries.get("total_max_attempts") is None  # retries
    admitted, lost = _admitted_with_a_lost_give_back(user_client)
    assert lost == 1
    assert admitted <= 10


def test_the_test_catches_a_give_back_sent_again(user_client: Any) -> None:
    """The fix reverted (every write may go through the user's retrying client): the
    give-back is applied twice, and the bucket admits 11 of 10."""
    with mutant(drivers, "ONE_ATTEMPT_OPS", frozenset()):
        admitted, lost = _admitted_with_a_lost_give_back(user_client)
    assert lost == 1
    assert admitted == 11
