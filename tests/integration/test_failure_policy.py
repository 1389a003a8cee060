"""Never hang the caller: DynamoDB failures become RateLimiterUnavailable within the
bound, or an admission with "allow"; no tokens are lost or created either way.

Faults are injected with botocore's event system on the real clients (tests/integration/
faults.py), for the sync (boto3 on moto) and the async (aiobotocore on a moto server) face.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Api
from tests.integration.faults import KINDS, faults, limiter, pk_contains
from tests.integration.stall_cases import CASES
from zae_limiter import Limit, RateLimiterUnavailable, RateLimitExceeded, ValidationError
from zae_limiter.flows.scaling.throttled import MAX_THROTTLED_WAITS

RPM = Limit.per_minute("rpm", 100)
TPM = Limit.per_minute("tpm", 10_000)


def warm(api: Api, entity: str = "key-1") -> None:
    with api.acquire(entity, "gpt-4", {"rpm": 1}):
        pass


def setup(api: Api) -> None:
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    warm(api)


def cascade(api: Api) -> None:
    api.create_entity("proj-1")
    api.create_entity("key-1", parent_id="proj-1", cascade=True)
    api.set_resource_defaults("gpt-4", [RPM, TPM])


@pytest.mark.parametrize("kind", KINDS)
def test_block_raises_unavailable_within_the_bound(api: Api, kind: str) -> None:
    setup(api)
    injected = faults(api)
    injected.fail(kind)
    # These faults are answered at once: the bound itself is checked against real stalls
    # (test_a_real_stall_ends_within_the_documented_bound).
    with pytest.raises(RateLimiterUnavailable):
        with api.acquire("key-1", "gpt-4", {"rpm": 5, "tpm": 100}):
            pytest.fail("the block must not run")
    assert injected.one_attempt_per_call()  # no SDK retries
    injected.heal()
    assert api.available("key-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}
    stats = api.limiter.get_stats().resources["gpt-4"]
    assert (stats.unavailable, stats.allowed_on_failure, stats.admitted) == (1, 0, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_allow_admits_with_a_lease_that_holds_nothing(api: Api, kind: str) -> None:
    setup(api)
    injected = faults(api)
    injected.fail(kind)
    with api.acquire("key-1", "gpt-4", {"rpm": 5, "tpm": 100}, on_unavailable="allow") as lease:
        assert lease.degraded == "allowed_on_failure"
        lease.adjust(tpm=500)  # accepted, never written
    writes = injected.takes
    with pytest.raises(KeyError):
        with api.acquire("key-1", "gpt-4", {"rpm": 5}, on_unavailable="allow"):
            raise KeyError("the guarded call failed")
    # the failed takes only (a throttled one retries after short waits): no give-back
    assert injected.takes <= writes + 1 + MAX_THROTTLED_WAITS
    injected.heal()
    assert api.available("key-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}
    stats = api.limiter.get_stats().resources["gpt-4"]
    assert (stats.allowed_on_failure, stats.unavailable) == (2, 0)


def test_policy_order_call_then_limiter_then_stored_then_block(api: Api) -> None:
    api.set_system_defaults([RPM], on_unavailable="allow")
    assert api.get_failure_policy() == "allow"
    fresh = api.new_client()  # learns the stored policy with the limits it resolves
    warm(fresh)
    injected = faults(fresh)
    injected.fail("throughput")
    with fresh.acquire("key-1", "gpt-4", {"rpm": 1}) as lease:
        assert lease.degraded == "allowed_on_failure"
    with pytest.raises(RateLimiterUnavailable):
        with fresh.acquire("key-1", "gpt-4", {"rpm": 1}, on_unavailable="block"):
            pass
    strict = limiter(fresh, on_unavailable="block")
    with pytest.raises(RateLimiterUnavailable):
        warm(strict)
    with strict.acquire("key-1", "gpt-4", {"rpm": 1}, on_unavailable="allow") as lease:
        assert lease.degraded == "allowed_on_failure"
    injected.heal()
    api.set_system_defaults([RPM])  # replacing the defaults without a policy clears it
    assert api.get_failure_policy() is None
    faults(api).fail("throughput")
    with pytest.raises(RateLimiterUnavailable):
        warm(api)


def test_limiter_level_allow(api: Api) -> None:
    setup(api)
    lenient = limiter(api, on_unavailable="allow")
    faults(api).fail("server")
    with lenient.acquire("key-1", "gpt-4", {"rpm": 1}) as lease:
        assert lease.degraded == "allowed_on_failure"
    assert lenient.limiter.get_stats().total.allowed_on_failure == 1


def test_rejections_and_bad_input_are_never_allowed(api: Api) -> None:
    lenient = limiter(api, on_unavailable="allow")
    lenient.set_limits("key-1", [RPM], resource="gpt-4")
    with lenient.acquire("key-1", "gpt-4", {"rpm": 100}):
        pass
    with pytest.raises(RateLimitExceeded):
        warm(lenient)
    with pytest.raises(ValidationError):
        with lenient.acquire("key-1", "gpt-4", {"rpm": -1}):
            pass
    with pytest.raises(ValidationError, match="on_unavailable"):
        with lenient.acquire("key-1", "gpt-4", {"rpm": 1}, on_unavailable="maybe"):  # type: ignore[arg-type]
            pass
    with pytest.raises(ValidationError, match="on_unavailable"):
        api.set_system_defaults([RPM], on_unavailable="sometimes")  # type: ignore[arg-type]
    stats = lenient.limiter.get_stats().resources["gpt-4"]
    assert (stats.rejected, stats.allowed_on_failure) == (1, 0)


@pytest.mark.parametrize("kind", ["throughput", "timeout"])
def test_cascade_parent_failure_gives_the_child_back(api: Api, kind: str) -> None:
    cascade(api)
    warm(api)  # learns the cascade: child and parent now go out together
    injected = faults(api)
    injected.fail(kind, ("UpdateItem",), pk_contains("proj-1"))
    with pytest.raises(RateLimiterUnavailable):
        with api.acquire("key-1", "gpt-4", {"rpm": 3, "tpm": 100}):
            pass
    injected.heal()
    assert api.available("key-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}
    assert api.available("proj-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}


def test_first_cascade_parent_failure_gives_the_child_back(api: Api) -> None:
    cascade(api)
    warm(api)
    fresh = api.new_client()  # learns the cascade from the child: the parent goes second
    injected = faults(fresh)
    injected.fail("server", match=pk_contains("proj-1"))
    with pytest.raises(RateLimiterUnavailable):
        warm(fresh)
    injected.heal()
    assert fresh.available("key-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}
    assert fresh.available("proj-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}


def test_parent_failure_after_the_child_gives_the_child_back(api: Api) -> None:
    cascade(api)
    warm(api)
    fresh = api.new_client()  # with limits given, it learns the cascade from the child's
    injected = faults(fresh)  # write: the parent is taken second, after the child
    injected.fail("server", match=pk_contains("proj-1"))
    with pytest.raises(RateLimiterUnavailable):
        with fresh.acquire("key-1", "gpt-4", {"rpm": 2}, limits=[RPM, TPM]):
            pass
    injected.heal()
    assert injected.answered["UpdateItem"] == 1
    assert fresh.available("key-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}
    assert fresh.available("proj-1", "gpt-4") == {"rpm": 99, "tpm": 10_000}


def test_cascade_parent_failure_with_allow_leaves_both_buckets_as_they_were(api: Api) -> None:
    cascade(api)
    warm(api)
    injected = faults(api)
    injected.fail("throttling", ("UpdateItem",), pk_contains("proj-1"))
    with api.acquire("key-1", "gpt-4", {"rpm": 3}, on_unavailable="allow") as lease:
        lease.adjust(tpm=50)
    injected.heal()
    assert api.available("key-1", "gpt-4")["rpm"] == 99
    assert api.available("proj-1", "gpt-4")["rpm"] == 99


@pytest.mark.parametrize("fresh_entity", [False, True])
def test_sustained_throttling_makes_a_bounded_number_of_attempts_per_acquire(
    api: Api, fresh_entity: bool
) -> None:
    api.set_system_defaults([RPM])
    if not fresh_entity:
        warm(api)
    injected = faults(api)
    injected.fail("throughput")
    # The bound is per acquire; each one waits out its real backoff (~1.2 s), so a few
    # show it as well as many (a retry loop without its cap fails on the first).
    acquires = 5
    for i in range(acquires):
        with pytest.raises(RateLimiterUnavailable):
            warm(api, "key-1" if not fresh_entity else f"key-{i}")
    # one attempt, one try to double the shards (at most once per client and window),
    # one attempt on another shard, a few after short waits: then the throttle reaches
    # the caller (flows/scaling/throttled.py)
    assert injected.takes <= (2 + MAX_THROTTLED_WAITS) * acquires
    assert injected.doublings <= acquires
    assert injected.one_attempt_per_call()
    assert api.repo.get_capacity_stats().throttles == injected.writes


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_real_stall_ends_within_the_documented_bound(
    kind: str, case: Callable[[str, str, str], None], moto_http: str, table_name: str
) -> None:
    # A loopback socket that reads requests and never answers (tests/integration/stall.py).
    case(kind, moto_http, table_name)


def test_shadow_mode_records_rejections_and_never_raises(api: Api) -> None:
    shadow = limiter(api, shadow=True)
    shadow.set_limits("key-1", [RPM], resource="gpt-4")
    with shadow.acquire("key-1", "gpt-4", {"rpm": 100}) as lease:
        assert lease.degraded is None
    for _ in range(3):
        with shadow.acquire("key-1", "gpt-4", {"rpm": 10}) as lease:
            assert lease.degraded == "shadow_rejected"
            lease.adjust(rpm=5)
    assert api.available("key-1", "gpt-4") == {"rpm": 0}  # nothing taken or created
    stats = shadow.limiter.get_stats().resources["gpt-4"]
    assert (stats.admitted, stats.shadow_rejected, stats.rejected) == (1, 3, 0)
    assert stats.decisions == 4 and stats.latency_sum_ms > 0
