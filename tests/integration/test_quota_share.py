"""An acquire larger than one shard's share of a sharded quota (issue 39; docs/quotas.md,
"Not yet"), on in-process moto with the clock injected: no shard can hold it, so it is
refused, and the refusal says so: the limit's `capacity` is the shard's share, and
`retry_after_seconds` is the time to the reset (it was 1 ms on a full shard: a caller
that honoured it retried in a tight loop, refused every time)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from tests.conftest import Clock
from tests.integration.test_quota_gather import MIDNIGHT_MS, _sharded
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter


@pytest.fixture
def clock() -> Iterator[Clock]:
    with mock_aws():
        yield Clock(MIDNIGHT_MS - 3_600_000)


def test_more_than_a_shards_share_is_refused_until_the_reset(
    table_name: str, clock: Clock
) -> None:
    daily = Limit.quota("daily", 1000, reset="0 0 * * *", tz="UTC")
    repo = _sharded(table_name, clock, daily, 1)  # 4 shards: 250 each
    limiter = SyncRateLimiter(repo)
    with pytest.raises(RateLimitExceeded) as refused:
        with limiter.acquire("e", "api", {"daily": 300}):
            pass
    (limit,) = refused.value.as_dict()["limits"]
    assert (limit["capacity"], limit["requested"]) == (250, 300), "the shard's share"
    assert refused.value.retry_after_seconds == 3600, "the reset, not a tight loop"
    # In parts no larger than the share, the same tokens are admitted.
    for _ in range(2):
        with limiter.acquire("e", "api", {"daily": 150}):
            pass
    assert limiter.available("e", "api")["daily"] == 1000 - 1 - 300
    repo.close()
