"""Pre-shard buckets: doubling at 80% of the partition's write limit, lazy shards that
conserve tokens, retry on other shards, discovery, and throttles as a doubling signal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from tests.conftest import Api, Clock
from zae_limiter import (
    Limit,
    RateLimiterUnavailable,
    RateLimitExceeded,
    SyncRateLimiter,
    SyncRepository,
)
from zae_limiter.flows.scaling.throttled import MAX_THROTTLED_WAITS

BIG = [Limit.per_minute("rpm", 1_000_000)]


def total_tokens(api: Api, entity: str = "hot", resource: str = "api") -> int:
    return sum(info.tokens["rpm"] for info in api.get_shards(entity, resource))


HEAT = 30


def heat(api: Api, clock: Clock, limits: list[Limit]) -> int:
    """30 writes over 1.16 s (25/s) on a 10/s partition: past 80% of its limit by more
    than chance explains, measured over the full second a rate needs before it counts.
    (moto does not throttle.) Returns the tokens taken."""
    for i in range(HEAT):
        if i:
            clock.advance(0.04)
        with api.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
    return HEAT


def test_doubles_past_80_percent_of_the_partition_limit(api: Api, clock: Clock) -> None:
    hot = api.new_client(partition_wcu=10, reserve=False)
    limits = [Limit.per_minute("rpm", 6000)]
    for _ in range(8):  # 8 writes inside one second: too short a window to judge
        with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
    assert hot.get_shards("hot", "api")[0].shard_count == 1
    clock.advance(1.0)
    taken = 8 + heat(hot, clock, limits)
    shard0 = hot.get_shards("hot", "api")[0]
    assert shard0.shard_count == 2
    assert "wcu" not in shard0.capacity and shard0.capacity == {"rpm": 3000}
    for _ in range(20):
        clock.advance(0.11)  # 9 writes per second from here on: spread over 2 shards
        with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
        taken += 1
    shards = hot.get_shards("hot", "api")
    assert [s.shard_id for s in shards] == [0, 1]
    assert {s.shard_count for s in shards} == {2}
    # About 4.4 s of refill at 100/s: never more tokens than that allows.
    assert total_tokens(hot) <= 6000 - taken + 440


def test_a_new_shard_takes_half_of_its_siblings_tokens(api: Api, clock: Clock) -> None:
    hot = api.new_client(partition_wcu=10, reserve=False)
    limits = [Limit.custom("rpm", 1000, 1, 3600)]  # no refill to speak of
    taken = heat(hot, clock, limits)
    assert hot.get_shards("hot", "api")[0].shard_count == 2
    while len(hot.get_shards("hot", "api")) < 2:
        clock.advance(0.5)
        with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
            pass
        taken += 1
    # Exact in millitokens (the refill of 1 token an hour adds a few): shards hold whole
    # tokens each, so their sum may be lower by less than one per shard.
    assert hot.available("hot", "api", limits=limits) == {"rpm": 1000 - taken}
    assert 1000 - taken - 2 < total_tokens(hot) <= 1000 - taken


def test_a_share_not_yet_split_off_counts_where_it_is(api: Api, clock: Clock) -> None:
    """Between a doubling and the first acquire on shard 1, shard 0 holds both shares:
    reads count them all, and `get_shards` shows shard 0 with both."""
    hot = api.new_client(partition_wcu=10, reserve=False)
    limits = [Limit.custom("rpm", 1000, 1, 3600)]  # no refill to speak of
    taken = 0
    while taken == 0 or hot.get_shards("hot", "api")[0].shard_count == 1:
        assert taken < 3 * HEAT, "never doubled"
        clock.advance(0.04)
        with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
            taken += 1
    (shard0,) = hot.get_shards("hot", "api")  # shard 1 is made by its first acquire
    assert shard0.shard_count == 2
    assert shard0.capacity == {"rpm": 1000} and shard0.tokens == {"rpm": 1000 - taken}
    assert hot.available("hot", "api", limits=limits) == {"rpm": 1000 - taken}
    assert hot.time_until_available("hot", "api", {"rpm": 1000 - taken}, limits=limits) == 0


def test_a_drained_shard_is_retried_on_another(api: Api, clock: Clock) -> None:
    hot = api.new_client(partition_wcu=10, reserve=False)
    limits = [Limit.custom("rpm", 100, 1, 3600)]
    admitted = heat(hot, clock, limits)
    clock.advance(1.1)
    for _ in range(120):
        clock.advance(0.2)
        try:
            with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
                admitted += 1
        except RateLimitExceeded:
            break
    # Tokens on one shard run out first; retries on the other keep admitting until the
    # whole entity is empty, and never past it. Less than one token may be stranded on
    # each shard (a split halves millitokens), so the last one can be refused.
    assert 99 <= admitted <= 100
    assert total_tokens(hot) == 0


#: 4,000 acquires at 790/s span 5 s: two whole 2 s write windows, and the third one joined
#: to the one before it. Past that the windows repeat (each restart keeps one window
#: before it), so a longer run judges nothing new: a doubling line moved to 75% is caught
#: after ~1,600 acquires, one at 76% is caught neither at this length nor at 10,000
#: (checked by patching `flows.scaling.doubling.DOUBLING_THRESHOLD`).
STEADY_ACQUIRES = 4_000


def test_sequential_acquires_below_80_percent_never_shard() -> None:
    with mock_aws():
        now = [1_800_000_000_000_000]  # microseconds, to pace at 790 writes/s exactly
        repo = SyncRepository.open(
            name="steady", create_table=True, clock=lambda: now[0] // 1000, reserve=False
        )
        limiter = SyncRateLimiter(repo)
        with limiter.acquire("steady", "api", {"rpm": 1}, limits=BIG):
            pass  # creates the bucket (its speculative write fails: nothing there yet)
        with repo.meter.measure() as m:
            for _ in range(STEADY_ACQUIRES):
                now[0] += 1266  # 790 per second, 79% of the default 1,000
                with limiter.acquire("steady", "api", {"rpm": 1}, limits=BIG):
                    pass
        assert all(call.ok for call in m.calls)
        assert [s.shard_count for s in limiter.get_shards("steady", "api")] == [1]
        repo.close()


@pytest.fixture
def throttled(clock: Clock) -> Iterator[tuple[SyncRateLimiter, list[str], set[str]]]:
    """A sync limiter whose writes to chosen partition keys get DynamoDB's throttle."""
    with mock_aws():
        repo = SyncRepository.open(
            name="hot-table", create_table=True, clock=clock, partition_wcu=10, reserve=False
        )
        hot_keys: set[str] = set()
        calls: list[str] = []
        events = repo._runner.client.meta.events

        def refuse(params: dict[str, Any], model: Any, **_: Any) -> Any:
            body = json.loads(params.get("body") or b"{}")
            key = body.get("Key", {}).get("PK", {}).get("S", "")
            calls.append(f"{model.name}:{key.rsplit('#', 1)[-1]}")
            raw = params.get("body") or b""
            if "let-doubling-through" in hot_keys and b'":new_shards"' in raw:
                return None
            if "let-piggyback-through" in hot_keys and b'":doubled_shards"' in raw:
                return None
            if model.name in ("UpdateItem", "PutItem") and key in hot_keys:
                body = {"Error": {"Code": "ProvisionedThroughputExceededException"}}
                return AWSResponse("http://x", 400, {}, None), body
            return None

        events.register("before-call.dynamodb.*", refuse)
        yield SyncRateLimiter(repo), calls, hot_keys
        repo.close()


def warm(limiter: SyncRateLimiter, clock: Clock) -> None:
    """12 writes in 1.1 s on a 10/s partition: past 60% of its limit by more than chance
    (a throttle there is the partition's), not past 80% by enough to double unprompted."""
    for i in range(12):
        if i:
            clock.advance(0.1)
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=BIG):
            pass
    assert limiter.get_shards("hot", "api")[0].shard_count == 1


def test_a_throttle_on_a_cool_shard_is_the_tables_no_doubling_no_retry(
    throttled: tuple[SyncRateLimiter, list[str], set[str]], clock: Clock
) -> None:
    """Table-level pressure (every write throttled, this shard far below its partition's
    limit): the acquire fails after a few tries on its shard, and the shard count stays."""
    limiter, calls, hot = throttled
    for _ in range(3):  # 3 writes in 2 s: 1.5/s on a 10/s partition
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=BIG):
            pass
        clock.advance(1.0)
    hot.add("default/BUCKET#hot#api#0")
    calls.clear()
    for _ in range(5):
        with pytest.raises(RateLimiterUnavailable) as raised:
            with limiter.acquire("hot", "api", {"rpm": 1}, limits=BIG):
                pass
        assert raised.value.throttled
        clock.advance(0.2)
    # no doubling try, no other shard, no config read; a few tries each
    # (flows/scaling/throttled.py), and reads of the shard's window, which show it far below
    # its partition's limit
    writes = [c for c in calls if c == "UpdateItem:0"]
    assert set(calls) <= {"UpdateItem:0", "GetItem:0"}
    assert 5 <= len(writes) <= 5 * (1 + MAX_THROTTLED_WAITS)
    assert len(calls) - len(writes) <= len(writes)
    assert limiter.get_shards("hot", "api")[0].shard_count == 1


def test_throttled_shard_zero_without_other_shards_fails_after_a_few_tries(
    throttled: tuple[SyncRateLimiter, list[str], set[str]], clock: Clock
) -> None:
    limiter, calls, hot = throttled
    warm(limiter, clock)
    hot.add("default/BUCKET#hot#api#0")
    calls.clear()
    with pytest.raises(RateLimiterUnavailable) as raised:
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=BIG):
            pass
    assert raised.value.throttled
    # The throttled write, the read that confirms a doubling is due (shard 0, with shard 1:
    # no shard a merge drained may stand where the raise makes room), one doubling try,
    # the probe of shard 1 (a read: it was never written) and the read of shard 0 that
    # shows there is none; then shard 0 again after short waits (flows/scaling/throttled.py),
    # with at most a read of its window between: bounded, no storm.
    assert calls[:5] == [
        "UpdateItem:0", "BatchGetItem:", "UpdateItem:0", "GetItem:1", "GetItem:0"
    ]  # fmt: skip
    rest = calls[5:]
    assert set(rest) <= {"UpdateItem:0", "GetItem:0"}
    assert rest.count("UpdateItem:0") <= 1 + MAX_THROTTLED_WAITS
    assert rest.count("GetItem:0") <= rest.count("UpdateItem:0")


def test_a_throttle_is_a_doubling_signal_and_another_shard_serves(
    throttled: tuple[SyncRateLimiter, list[str], set[str]], clock: Clock
) -> None:
    limiter, calls, hot = throttled
    warm(limiter, clock)
    # Shard 0 refuses acquires (and the split's donor write), but not the doubling.
    hot.update({"default/BUCKET#hot#api#0", "let-doubling-through"})
    calls.clear()
    try:
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=BIG):
            pass
    except RateLimitExceeded as refused:
        # The new shard starts empty and earns its share of the refill from now: within
        # the same millisecond it may not hold a token yet.
        assert refused.retry_after_seconds < 0.01
    shards = limiter.get_shards("hot", "api")
    assert [s.shard_id for s in shards] == [0, 1]
    assert shards[0].shard_count == 2
    # throttled acquire on 0, the confirming read (shard 0 with shard 1) and the doubling
    # on 0, then shard 1: read (never written: it may not exist), created empty (its donor
    # is throttled, so it gives nothing: no tokens are made up), in a transaction that
    # checks shard 0
    assert calls[:4] == ["UpdateItem:0", "BatchGetItem:", "UpdateItem:0", "GetItem:1"]
    assert any(c.startswith("TransactWriteItems") for c in calls)


def test_lower_count_is_learned_from_a_shard_beyond_it(api: Api, clock: Clock) -> None:
    hot = api.new_client(partition_wcu=10, reserve=False)
    heat(hot, clock, BIG)
    meta = hot.repo.state.entities["hot"]
    assert meta.shards.counts["api"] == 2
    meta.shards.counts["api"] = 8  # a stale, too-high count (as after a merge)
    for _ in range(30):
        clock.advance(0.5)
        with hot.acquire("hot", "api", {"rpm": 1}, limits=BIG):
            pass
        if meta.shards.counts["api"] == 2:
            break
    assert meta.shards.counts["api"] == 2


def test_a_throttled_doubling_rides_on_the_next_write_to_shard_zero(
    throttled: tuple[SyncRateLimiter, list[str], set[str]], clock: Clock
) -> None:
    limiter, calls, hot = throttled
    warm(limiter, clock)
    hot.update({"default/BUCKET#hot#api#0", "let-piggyback-through"})
    calls.clear()
    # Throttled, the doubling throttled too, no shard 1: the acquire tries shard 0 again
    # after a short wait, and that write carries the doubling and gets in.
    with limiter.acquire("hot", "api", {"rpm": 1}, limits=BIG):
        pass
    assert calls[-1] == "UpdateItem:0"
    assert limiter.get_shards("hot", "api")[0].shard_count == 2
    assert limiter.repository.state.entities["hot"].shards.counts["api"] == 2
