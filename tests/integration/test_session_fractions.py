"""A session quota's fractions of a token on a sharded entity are not gathered (issue 39;
docs/quotas.md, "Not yet"), on in-process moto with the clock injected.

A calendar quota's take that every shard tried refuses reads all the shards and moves
what one lacks onto it (flows/scaling/gather.py); a session quota's does not: its shards
join shard 0's session one by one (flows/scaling/sessions.py), and the gather once tried
for them moved a token between shards of different sessions (the fault simulator's seed
3522: over the quota). What that leaves out of reach is what the shard count does not
divide: 10 on 4 shards (2.5 each) leaves half a token on shards whose takes stopped at
2, so a session admits 8 or 9 of 10 while the shards together still hold a whole token.
A quota the count divides into whole tokens (1,000 on 4 shards: 250) has no such
fractions: a split's go to shard 0 (`test_session_shards.py`), and the session admits
exactly the quota (DynamoDB Local, `tests/engine/test_quota_exactness.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from moto import mock_aws

from tests.conftest import Clock
from tests.integration.test_quota_gather import MIDNIGHT_MS, _drain, _items, _sharded
from zae_limiter import Limit, SyncRateLimiter, keys
from zae_limiter.flows.write.shares import tokens_now


@pytest.fixture
def clock() -> Iterator[Clock]:
    with mock_aws():
        yield Clock(MIDNIGHT_MS - 3_600_000)


def test_a_session_quota_the_shard_count_does_not_divide_strands_its_fractions(
    table_name: str, clock: Clock
) -> None:
    session = Limit.quota("runs", 10, reset_after=timedelta(hours=1))
    repo = _sharded(table_name, clock, session, 1)  # the first take opens the session
    admitted = 1 + _drain(SyncRateLimiter(repo), "runs")
    shards = [keys.decode_bucket(item) for item in _items(repo)]
    left = sum(tokens_now(bucket, session, clock.now_ms) for bucket in shards)
    # Nothing is created, and nothing is lost: what the session did not admit is still
    # on the shards, in pieces no whole-token take fits.
    assert admitted + left / 1000 == 10, (admitted, left)
    assert admitted < 10 and left >= 1000, f"{admitted} admitted, {left} millitokens left"
    assert all(tokens_now(bucket, session, clock.now_ms) < 1000 for bucket in shards)
    repo.close()
