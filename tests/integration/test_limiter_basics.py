"""Acquire, adjust, rollback, rejection and stored limits; the same body for sync and async."""

from __future__ import annotations

import pytest

from tests.conftest import Api, Clock
from zae_limiter import Limit, RateLimitExceeded, ValidationError

RPM = Limit.per_minute("rpm", 100)
TPM = Limit.per_minute("tpm", 10_000)


def test_acquire_takes_tokens_and_adjust_is_written_at_exit(api: Api) -> None:
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    with api.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 500}) as lease:
        lease.adjust(tpm=242)
        assert api.available("key-1", "gpt-4") == {"rpm": 99, "tpm": 9_500}
    assert api.available("key-1", "gpt-4") == {"rpm": 99, "tpm": 9_258}


def test_the_lease_knows_what_its_write_left_including_other_clients(api: Api) -> None:
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    other = api.new_client(reserve=False)
    with api.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 500}) as lease:
        assert lease.limits == (RPM, TPM)
        assert lease.remaining == {"rpm": 99, "tpm": 9_500}  # the new bucket, as written
    with other.acquire("key-1", "gpt-4", {"rpm": 2, "tpm": 1_000}):
        pass
    with api.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 500}) as lease:
        assert lease.remaining == {"rpm": 96, "tpm": 8_000}


def test_exception_inside_the_block_gives_tokens_back(api: Api) -> None:
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    with pytest.raises(RuntimeError), api.acquire("key-1", "gpt-4", {"rpm": 5, "tpm": 700}):
        raise RuntimeError("upstream failed")
    assert api.available("key-1", "gpt-4") == {"rpm": 100, "tpm": 10_000}


def test_adjust_may_leave_debt_which_blocks_until_refilled(api: Api, clock: Clock) -> None:
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    with api.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 1_000}) as lease:
        lease.adjust(tpm=11_000)  # the call used far more than estimated
    assert api.available("key-1", "gpt-4")["tpm"] == -2_000
    with pytest.raises(RateLimitExceeded) as caught:
        with api.acquire("key-1", "gpt-4", {"rpm": 1}):
            pass
    assert [v.limit_name for v in caught.value.violations] == ["tpm"]
    clock.advance(13)  # 10,000 tpm refill 166.67 tokens/s: 2,000 of debt takes 12 s
    with api.acquire("key-1", "gpt-4", {"rpm": 1}):
        pass


def test_rejection_names_every_violated_limit_with_retry_after(api: Api) -> None:
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    with api.acquire("key-1", "gpt-4", {"rpm": 99, "tpm": 9_990}):
        pass
    with pytest.raises(RateLimitExceeded) as caught:
        with api.acquire("key-1", "gpt-4", {"rpm": 2, "tpm": 20}):
            pass
    error = caught.value
    assert sorted(v.limit_name for v in error.violations) == ["rpm", "tpm"]
    rpm = next(v for v in error.violations if v.limit_name == "rpm")
    assert (rpm.available, rpm.requested, rpm.capacity) == (1, 2, 100)
    assert error.retry_after_seconds == pytest.approx(0.6, abs=0.01)  # 1 rpm token: 0.6 s
    assert error.retry_after_header == "1"
    body = error.as_dict()
    assert body["error"] == "rate_limit_exceeded"
    assert {item["limit"] for item in body["limits"]} == {"rpm", "tpm"}


def test_tokens_come_back_with_time(api: Api, clock: Clock) -> None:
    limits = [Limit.per_second("rps", 10)]
    for _ in range(10):
        with api.acquire("e", "api", {"rps": 1}, limits=limits):
            pass
    with pytest.raises(RateLimitExceeded):
        with api.acquire("e", "api", {"rps": 1}, limits=limits):
            pass
    clock.advance(0.1)
    with api.acquire("e", "api", {"rps": 1}, limits=limits):
        pass
    assert api.available("e", "api", limits=limits) == {"rps": 0}
    assert api.time_until_available("e", "api", {"rps": 5}, limits=limits) == pytest.approx(0.5)


def test_limits_resolve_from_the_most_specific_level(api: Api) -> None:
    system = [Limit.per_minute("rpm", 1)]
    api.set_system_defaults(system)
    api.set_resource_defaults("gpt-4", [Limit.per_minute("rpm", 2)])
    api.set_limits("key-1", [Limit.per_minute("rpm", 3)])
    api.set_limits("key-1", [Limit.per_minute("rpm", 4)], resource="gpt-4")
    assert api.resolve_limits("key-1", "gpt-4").source == "entity"
    assert api.resolve_limits("key-1", "other").limits[0].capacity == 3
    assert api.resolve_limits("key-2", "gpt-4").limits[0].capacity == 2
    assert api.resolve_limits("key-2", "other").source == "system"
    assert api.get_system_defaults() == tuple(system)
    api.delete_limits("key-1", resource="gpt-4")
    api.delete_resource_defaults("gpt-4")
    api.delete_system_defaults()
    assert api.resolve_limits("key-1", "gpt-4").source == "entity_default"
    assert api.resolve_limits("key-2", "gpt-4") is None
    with pytest.raises(ValidationError, match="no limits for entity 'key-2'"):
        with api.acquire("key-2", "gpt-4", {"rpm": 1}):
            pass


def test_limits_argument_overrides_stored_ones(api: Api) -> None:
    api.set_system_defaults([Limit.per_minute("rpm", 1)])
    with api.acquire("k", "r", {"rpm": 5}, limits=[Limit.per_minute("rpm", 50)]):
        pass
    assert api.available("k", "r", limits=[Limit.per_minute("rpm", 50)]) == {"rpm": 45}


def test_entities_children_and_delete(api: Api) -> None:
    api.create_entity("proj-1", name="Production")
    api.create_entity("key-1", parent_id="proj-1", cascade=True)
    api.create_entity("key-2", parent_id="proj-1")
    assert api.get_entity("proj-1").name == "Production"
    assert [e.entity_id for e in api.get_children("proj-1")] == ["key-1", "key-2"]
    assert api.list_entities() == ["key-1", "key-2", "proj-1"]
    with api.meter() as m:
        found = api.get_entities(["proj-1", "ghost", "key-2"])
    assert [e.entity_id for e in found] == ["proj-1", "key-2"]
    assert m.ops == ["batch_get_item"]
    api.set_limits("key-2", [RPM])
    with api.acquire("key-2", "gpt-4", {"rpm": 1}):
        pass
    with pytest.raises(ValidationError, match="has 2 children"):
        api.delete_entity("proj-1")
    api.delete_entity("key-2")
    assert api.get_entity("key-2") is None
    assert api.get_limits("key-2") == ()
    assert api.available("key-2", "gpt-4", limits=[RPM]) == {"rpm": 100}
