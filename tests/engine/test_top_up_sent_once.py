"""A top-up whose answer is lost is applied once, on DynamoDB Local (docs/controls.md).

The user's boto3 client keeps botocore's retries: when the answer of the top-up's
transaction is lost, botocore sends the same request again. Its ClientRequestToken makes
DynamoDB apply it once. The answer is lost for real, as in test_writes_sent_once.py: a
`before-send` handler sends the request itself, then raises the read timeout botocore
raises when no answer comes. (botocore fills in a token when a request has none, so
dropping ours would not break this; ours makes it explicit for any client that sends
the transaction. That the library itself never sends a top-up again is
tests/unit/test_flows_controls.py's.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._servers import unique_name
from tests.engine._lost_answer import LoseAnswer
from zae_limiter import Limit, SyncRateLimiter, SyncRepository

pytestmark = pytest.mark.engine

#: Ten tokens that never refill within the test.
LIMIT = Limit.custom("rpm", 10, 1, 366 * 86400 - 1)


class FirstAnswerLost(LoseAnswer):
    """The first transaction reaches DynamoDB; its answer is lost."""

    def loses(self, request: Any) -> bool:
        return self.sent == 1


def _available_after_a_lost_top_up(client: Any) -> tuple[int, int]:
    """(tokens available after 8 taken and a top-up of 3, transactions sent)."""
    hook = FirstAnswerLost()
    client.meta.events.register("before-send.dynamodb.TransactWriteItems", hook)
    repo = SyncRepository.open(name=unique_name(), create_table=True, client=client,
                               lean=False, reserve=False, timeout=10,
                               principal="ops")  # fmt: skip
    limiter = SyncRateLimiter(repo)
    with limiter.acquire("k", "api", {"rpm": 8}, limits=[LIMIT]):
        pass
    done = limiter.top_up("k", "api", {"rpm": 3}, reason="lost answer")
    assert done.granted == {"rpm": 3.0}
    available = limiter.available("k", "api", limits=[LIMIT])["rpm"]
    repo.close()
    return available, hook.sent


def test_a_top_up_whose_answer_is_lost_is_applied_once(user_client: Any) -> None:
    available, sent = _available_after_a_lost_top_up(user_client)
    assert sent == 2  # botocore sent it again
    assert available == 5
