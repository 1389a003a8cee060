"""Writes sent once, on DynamoDB Local (docs/resilience.md, "Writes sent once").

A boto3 client of the user's own keeps botocore's retries. A rollback's give-back that
DynamoDB applied but whose answer was lost must not be sent again by it: issue 35 found
11 admitted of 10 that way. The answer is lost here for real: a `before-send` handler on
the user's client sends the request to DynamoDB Local itself, then raises the read
timeout botocore raises when an answer never comes (and retries on, in every mode).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests._servers import unique_name
from tests.engine._lost_answer import LoseAnswer
from tests.mutants import mutant
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository, drivers

pytestmark = pytest.mark.engine

#: Ten tokens that never refill within the test.
LIMIT = Limit.custom("rpm", 10, 1, 366 * 86400 - 1)


class AnswerLost(LoseAnswer):
    """The first give-back (a write that lowers usage) reaches DynamoDB, and its answer
    is lost."""

    def loses(self, request: Any) -> bool:
        body = json.loads(request.body or b"{}")
        values = body.get("ExpressionAttributeValues", {})
        gives_back = any(k.startswith(":used") and v.get("N", "").startswith("-")
                         for k, v in values.items())  # fmt: skip
        return gives_back and not self.lost


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
