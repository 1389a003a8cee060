"""A session quota on an entity of several shards (the clock injected; in-process moto,
and DynamoDB Local in tests/engine/test_session_shards_engine.py):
every shard shares one session, opened by the first admitted take whichever shard it
lands on (shard 0 holds it, flows/scaling/sessions.py), so no session admits more than
the quota over all shards, and a split conserves its allowance to the last token."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.conftest import Clock, Tables
from tests.integration.test_quota_shards import drain
from zae_limiter import Limit, SyncRateLimiter, keys
from zae_limiter.flows.write.shares import tokens_now

T0 = 1_800_000_000_000
LENGTH_MS = 60_000
SESSION = Limit.quota("daily", 40, reset_after=timedelta(milliseconds=LENGTH_MS))
SHARDS = 4


def _raise(
    tables: Tables, namespace: str, table_name: str, old: int, new: int, now_ms: int
) -> None:
    """Raise shard 0's count as the library's doubling does (its snapshot taken)."""
    shard0 = keys.bucket_key(namespace, "e", "api", 0)
    params = keys.double_shards(table_name, shard0, old, new, now_ms, now_ms, ["daily"])
    tables.client().update_item(**params)


@pytest.fixture
def sharded(table_name: str, tables: Tables) -> Iterator[tuple[SyncRateLimiter, Clock, str]]:
    """An entity of 4 shards whose session opened at T0 with one take, before the split."""
    clock = Clock(T0)
    repo = tables.open(table_name, create_table=True, clock=clock, reserve=False)
    limiter = SyncRateLimiter(repo)
    limiter.set_limits("e", [SESSION], resource="api")
    with limiter.acquire("e", "api", {"daily": 1}):
        pass
    _raise(tables, repo.state.namespace, table_name, 1, SHARDS, T0)
    client = tables.open(table_name, clock=clock, reserve=False)
    yield SyncRateLimiter(client), clock, repo.state.namespace
    client.close()
    repo.close()


def _ends(limiter: SyncRateLimiter) -> set[int]:
    """When the session each shard holds ends (shards with none open left out)."""
    shards = limiter.get_shards("e", "api")
    return {shard.resets_at_ms["daily"] for shard in shards if "daily" in shard.resets_at_ms}


def test_every_shard_shares_the_session_the_first_take_opened(
    sharded: tuple[SyncRateLimiter, Clock, str],
) -> None:
    """Against the ideal session quota fed the same arrivals (a session opens at the
    first admitted take after the last one ended and admits at most 40 until it ends):
    takes reach the shards at different times of a session, and every shard still
    joins the session the first take opened, so the next session admits exactly 40."""
    client, clock, _ = sharded
    clock.now_ms = T0 + 1_000
    assert 1 + drain(client) == 40, "the first session: exactly the quota over 4 shards"
    assert _ends(client) == {T0 + LENGTH_MS}, "every shard in the one session"

    opened = T0 + LENGTH_MS + 5_000  # ended; the next take opens a session, on any shard
    clock.now_ms = opened
    with client.acquire("e", "api", {"daily": 1}):
        pass
    clock.now_ms = opened + LENGTH_MS // 2  # other shards first taken half-way through
    for _ in range(7):
        with client.acquire("e", "api", {"daily": 1}):
            pass

    # The third session opens at its first take, and runs to `third + LENGTH_MS`: what
    # the shards admit in it, drained at its start and again half-way through.
    third = opened + LENGTH_MS + 1
    clock.now_ms = third
    admitted = drain(client)
    clock.now_ms = opened + LENGTH_MS + LENGTH_MS // 2 + 1
    admitted += drain(client)
    assert admitted <= 40, f"{admitted} admitted in one session of 40"
    assert admitted == 40, "and every token of it reachable"
    assert _ends(client) == {third + LENGTH_MS}


def test_a_split_session_quota_admits_exactly_its_allowance(
    table_name: str, tables: Tables
) -> None:
    """Split 1 -> 2 -> 4 after odd numbers of takes: the fractions of a token go to
    shard 0 inside the session, so the session admits exactly 40 and leaves nothing."""
    clock = Clock(T0)
    repo = tables.open(table_name, create_table=True, clock=clock, reserve=False)
    limiter = SyncRateLimiter(repo)
    limiter.set_limits("e", [SESSION], resource="api")
    with limiter.acquire("e", "api", {"daily": 1}):
        pass
    taken = 1
    namespace = repo.state.namespace
    _raise(tables, namespace, table_name, 1, 2, clock.now_ms)
    while len(limiter.get_shards("e", "api")) < 2:
        with limiter.acquire("e", "api", {"daily": 1}):
            taken += 1
    if taken % 2 == 0:
        with limiter.acquire("e", "api", {"daily": 1}):
            taken += 1
    _raise(tables, namespace, table_name, 2, SHARDS, clock.now_ms)
    clock.now_ms += 1_000
    client = SyncRateLimiter(tables.open(table_name, clock=clock, reserve=False))
    assert taken + drain(client) == 40
    assert len(client.get_shards("e", "api")) == SHARDS
    assert _ends(client) == {T0 + LENGTH_MS}
    dynamodb = tables.client()
    left = 0
    for shard in range(SHARDS):
        key = keys.bucket_key(namespace, "e", "api", shard)
        item = dynamodb.get_item(TableName=table_name, Key=key, ConsistentRead=True)["Item"]
        left += tokens_now(keys.decode_bucket(item), SESSION, clock.now_ms)
    assert left == 0, "nothing stranded, not even a fraction of a token"
    repo.close()
