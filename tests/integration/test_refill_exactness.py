"""A bucket that sat full gives no more than its capacity, on both faces, with and without
token reserves: a speculative take leaves the refill for later only under a ceiling that
makes it exact (flows/speculative.py)."""

from __future__ import annotations

import pytest

from tests.conftest import Api, Clock
from zae_limiter import Limit, RateLimitExceeded

#: 10 a minute: one token every 6 s.
LIMITS = [Limit.per_minute("rpm", 10)]


def admitted(api: Api, attempts: int) -> int:
    count = 0
    for _ in range(attempts):
        try:
            with api.acquire("k", "gpt", {"rpm": 1}, limits=LIMITS):
                count += 1
        except RateLimitExceeded:
            pass
    return count


@pytest.mark.parametrize("reserve", [True, False], ids=["reserves", "no-reserves"])
def test_a_burst_after_idle_time_gets_the_capacity_not_more(
    api: Api, clock: Clock, reserve: bool
) -> None:
    client = api.new_client(reserve=reserve)
    assert admitted(client, 1) == 1
    clock.advance(300)  # full again long ago: the refill since then is lost, not saved up
    assert admitted(client, 30) == 10


@pytest.mark.parametrize("reserve", [True, False], ids=["reserves", "no-reserves"])
def test_light_traffic_then_a_burst_gets_the_capacity_not_more(
    api: Api, clock: Clock, reserve: bool
) -> None:
    client = api.new_client(reserve=reserve)
    for _ in range(6):  # one a minute: the bucket stays about full, its tokens drift down
        assert admitted(client, 1) == 1
        clock.advance(60)
    assert admitted(client, 30) == 10


def test_two_clients_share_one_capacity_after_idle_time(api: Api, clock: Clock) -> None:
    first, second = api.new_client(reserve=False), api.new_client(reserve=False)
    assert admitted(first, 1) == 1
    assert admitted(second, 1) == 1
    clock.advance(300)
    # Each client's image of the bucket is old; together they still get 10.
    assert admitted(first, 4) + admitted(second, 30) + admitted(first, 30) == 10


def test_a_full_bucket_costs_one_write_per_acquire(api: Api, clock: Clock) -> None:
    client = api.new_client(reserve=False)
    assert admitted(client, 1) == 1
    with client.meter() as m:
        for _ in range(5):
            clock.advance(60)  # full again each time: the refill is written with the take
            assert admitted(client, 1) == 1
    assert m.ops == ["update_item"] * 5
    assert all(call.ok for call in m.calls)


def test_a_busy_bucket_takes_one_write_per_acquire(api: Api, clock: Clock) -> None:
    roomy = [Limit.per_minute("rpm", 6000)]
    client = api.new_client(reserve=False)
    for _ in range(10):
        with client.acquire("k", "gpt", {"rpm": 100}, limits=roomy):
            pass
    with client.meter() as m:
        for _ in range(20):
            clock.advance(0.05)
            with client.acquire("k", "gpt", {"rpm": 100}, limits=roomy):
                pass
    assert m.ops == ["update_item"] * 20
    assert all(call.ok for call in m.calls)  # no failed condition, no fallback
