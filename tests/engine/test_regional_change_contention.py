"""A lease's changes on a regional share under contention, on DynamoDB Local (it applies
concurrent updates of one item atomically, as DynamoDB does; moto's server does not):
docs/global.md, "Leases, adjustments and rollbacks".

Six clients (a repository each, so nothing is coordinated in memory) acquire one token
at a time from one region's share of a global limit that refills by a tenth of a token
over the run, each lease at random kept, rolled back (an exception), adjusted up or
adjusted down. Tokens are neither created nor lost: the share ends holding exactly its
capacity less what the admitted leases kept, plus the refill of the run.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk

pytestmark = pytest.mark.engine

CLIENTS = 6
ATTEMPTS = 40
REGIONS = ("us-east-1", "eu-west-1")
WHOLE = Limit.per_day("gpd", 300).across(*REGIONS)  # 150 here, 0.0017 a second
KEPT = {"keep": 1, "raise": 0, "up": 2, "down": 0}


class Boom(Exception):
    pass


def _client(url: str, table: str, seed: int, kept: list[int], errors: list[BaseException]) -> None:
    rng = random.Random(seed)
    repo = SyncRepository.open(name=table, endpoint_url=url, region="us-east-1")
    limiter = SyncRateLimiter(repo)
    try:
        for _ in range(ATTEMPTS):
            then = rng.choice(list(KEPT))
            try:
                with limiter.acquire("tenant", "api", {"gpd": 1}, limits=[WHOLE]) as lease:
                    if repo.state.shares is not None:
                        for memory in repo.state.shares.memories.values():
                            memory.reserve = False  # exact takes: a reserve can age out
                    if then == "raise":
                        raise Boom
                    if then in ("up", "down"):
                        lease.adjust(gpd=1 if then == "up" else -1)
                kept.append(KEPT[then])
            except (Boom, RateLimitExceeded):
                pass
    except BaseException as error:  # reported to the test, not lost in a thread
        errors.append(error)
    finally:
        repo.close()


@pytest.mark.slow
def test_concurrent_leases_neither_create_nor_lose_share_tokens(
    dynamodb_local: EngineEndpoint,
) -> None:
    table = unique_name()
    url = dynamodb_local.url
    SyncRepository.open(name=table, endpoint_url=url, region="us-east-1", create_table=True).close()
    kept: list[int] = []
    errors: list[BaseException] = []
    started_ms = int(time.time() * 1000)
    threads = [
        threading.Thread(target=_client, args=(url, table, seed, kept, errors))
        for seed in range(CLIENTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    repo = SyncRepository.open(name=table, endpoint_url=url, region="us-east-1")
    try:
        key = rk.share_key(repo.namespace, "tenant", "api", "gpd", "us-east-1")
        item = repo.client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    finally:
        repo.close()
    now_ms = int(time.time() * 1000)
    share = core.decode(item)
    refill_milli = share.rate_milli * (now_ms - started_ms) // share.period_ms + 1
    expected = share.capacity_milli - 1000 * sum(kept)
    assert len(kept) > 20  # many admitted (adjustments up may leave the share in debt)
    assert 0 <= share.tokens(now_ms) - expected <= refill_milli, (share, sum(kept))
    assert share.consumed_milli == 1000 * sum(kept)
