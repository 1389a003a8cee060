"""Never overrun the table: admission control of the client's own DynamoDB calls.

The test clock stands still unless a test moves it, so a budget refills only when told.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import Api, Clock
from tests.integration.faults import faults
from zae_limiter import Limit, RateLimiterUnavailable
from zae_limiter.capacity import AdaptiveRate, FixedRate
from zae_limiter.repository import DEFAULT_TIMEOUT, LOCAL_TIMEOUT, resolve_timeout

RPM = Limit.per_minute("rpm", 1000)


def warm(api: Api, **options: object) -> object:
    with api.acquire("key-1", "gpt-4", {"rpm": 1}, **options) as lease:
        return lease.degraded


def test_an_empty_budget_refuses_within_max_wait(api: Api, clock: Clock) -> None:
    api.set_limits("key-1", [RPM], resource="gpt-4")
    budget = api.new_client(capacity=FixedRate(wcu=2, burst=2), max_wait=0.2)
    warm(budget)
    warm(budget)  # two writes: the burst is spent, and the clock stands still
    started = time.monotonic()
    with pytest.raises(RateLimiterUnavailable) as caught:
        warm(budget)
    assert caught.value.code == "CapacityExhausted"
    assert time.monotonic() - started < 0.2 + 1.0
    assert warm(budget, on_unavailable="allow") == "allowed_on_failure"
    stats = budget.repo.get_capacity_stats()
    assert (stats.refusals, stats.waits, stats.wcu_rate, stats.rcu_rate) == (2, 0, 2, None)
    assert budget.available("key-1", "gpt-4") == {"rpm": 998}  # reads are not limited
    clock.advance(1)
    assert warm(budget) is None  # refilled: admitted again


def test_a_short_wait_is_slept_then_the_call_goes(api: Api) -> None:
    api.set_limits("key-1", [RPM], resource="gpt-4")
    budget = api.new_client(capacity=FixedRate(wcu=20, burst=1), max_wait=0.5)
    warm(budget)  # one write: spends the one-unit burst
    started = time.monotonic()
    warm(budget)  # its write waits 50 ms for its unit
    assert time.monotonic() - started >= 0.05
    stats = budget.repo.get_capacity_stats()
    assert (stats.waits, stats.refusals) == (1, 0)
    assert stats.wait_seconds == pytest.approx(0.05, abs=0.002)


def test_reads_have_their_own_budget(api: Api, clock: Clock) -> None:
    budget = api.new_client(capacity=FixedRate(rcu=1, burst=1), max_wait=0)
    clock.advance(1)  # opening read the schema version: refill
    api.set_limits("key-1", [RPM], resource="gpt-4")
    assert budget.get_limits("key-1", "gpt-4")  # a consistent read: 1 RCU
    with pytest.raises(RateLimiterUnavailable):
        budget.get_limits("key-1", "gpt-4")
    budget.create_entity("key-2")  # writes still go (a transaction that reads nothing)
    assert budget.repo.get_capacity_stats().refusals == 1


def test_adaptive_rate_is_cut_by_throttles_and_grows_back(api: Api, clock: Clock) -> None:
    api.set_limits("key-1", [RPM], resource="gpt-4")
    adaptive = api.new_client(capacity=AdaptiveRate(max_rcu=100, max_wcu=100))
    warm(adaptive)
    assert adaptive.repo.get_capacity_stats().wcu_rate == 50
    injected = faults(adaptive)
    injected.fail("throughput")
    with pytest.raises(RateLimiterUnavailable):
        warm(adaptive)
    stats = adaptive.repo.get_capacity_stats()
    assert stats.throttles == injected.writes >= 1
    assert stats.wcu_rate == pytest.approx(50 * 0.8**stats.throttles)
    injected.heal()
    clock.advance(10)
    assert adaptive.repo.get_capacity_stats().wcu_rate == pytest.approx(
        50 * 0.8**stats.throttles * 1.1
    )


def test_consumption_is_metered(api: Api) -> None:
    api.set_limits("key-1", [RPM], resource="gpt-4")
    before = api.repo.get_capacity_stats()
    warm(api)
    after = api.repo.get_capacity_stats()
    assert after.calls > before.calls
    assert after.consumed_wcu > before.consumed_wcu
    assert (after.waits, after.refusals, after.wcu_rate) == (0, 0, None)


@pytest.mark.aws_deadline
def test_client_timeouts_and_no_sdk_retries(api: Api) -> None:
    default = api.new_client(timeout=None)
    config = default.repo.client.meta.config
    # The sync face runs on in-process moto (an AWS-like endpoint: 1 s); the async face on
    # a moto server on loopback, where the default is the patient local one.
    bound = DEFAULT_TIMEOUT if api.kind == "sync" else LOCAL_TIMEOUT
    assert default.repo.timeout == bound
    assert (config.connect_timeout, config.read_timeout) == pytest.approx(
        (0.3 * bound, 0.5 * bound)
    )
    assert config.retries["total_max_attempts"] == 1
    patient = api.new_client(timeout=4.0)
    config = patient.repo.client.meta.config
    assert (config.connect_timeout, config.read_timeout) == pytest.approx((1.2, 2.0))


@pytest.mark.aws_deadline
@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        (None, 1.0),
        ("https://dynamodb.eu-west-1.amazonaws.com", 1.0),
        ("http://127.0.0.1:8000", 10.0),
        ("http://localhost:4566", 10.0),
        ("http://[::1]:8000", 10.0),
    ],
)
def test_default_timeout_depends_on_the_endpoint(endpoint: str | None, expected: float) -> None:
    assert resolve_timeout(None, endpoint) == expected
    assert resolve_timeout(2.5, endpoint) == 2.5
