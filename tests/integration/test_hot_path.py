"""The hot path's budget, counted with the capacity meter: calls and round trips per path."""

from __future__ import annotations

import pytest

from tests.conftest import Api, Clock
from zae_limiter import Limit, RateLimitExceeded, ValidationError

RPM = Limit.per_minute("rpm", 100)
TPM = Limit.per_minute("tpm", 10_000)


def warm(api: Api, entity: str = "key-1", resource: str = "gpt-4") -> None:
    with api.acquire(entity, resource, {"rpm": 1}):
        pass


def test_speculative_success_is_one_write(api: Api) -> None:
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    warm(api)
    with api.meter() as m:
        with api.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 100}):
            pass
    assert (m.ops, m.round_trips, m.rcu) == (["update_item"], 1, 0)


def test_first_acquire_of_a_new_entity_takes_two_round_trips(api: Api) -> None:
    api.create_entity("key-1")
    api.set_limits("key-1", [RPM, TPM], resource="gpt-4")
    with api.meter() as m:
        warm(api)
    assert m.ops == ["batch_get_item", "put_item"]
    assert m.round_trips == 2  # configs, META and the bucket in one batch; then create


def test_first_cascade_acquire_takes_three_round_trips_then_one(api: Api) -> None:
    api.create_entity("proj-1")
    api.create_entity("key-1", parent_id="proj-1", cascade=True)
    api.set_resource_defaults("gpt-4", [RPM, TPM])
    with api.meter() as m:
        warm(api)
    assert m.round_trips == 3
    assert sorted(m.ops) == ["batch_get_item", "batch_get_item", "put_item", "put_item"]
    with api.meter() as m:
        warm(api)
    assert (m.ops, m.round_trips) == (["update_item", "update_item"], 1)
    assert api.available("proj-1", "gpt-4")["rpm"] == 98


def test_rejection_known_locally_costs_nothing(api: Api) -> None:
    api.set_limits("key-1", [RPM], resource="gpt-4")
    with api.acquire("key-1", "gpt-4", {"rpm": 100}):
        pass
    with pytest.raises(RateLimitExceeded):
        warm(api)
    with api.meter() as m:
        with pytest.raises(RateLimitExceeded) as caught:
            warm(api)
    assert m.ops == []
    assert caught.value.violations[0].limit_name == "rpm"


def test_local_memory_never_rejects_what_would_fit(api: Api, clock: Clock) -> None:
    api.set_limits("key-1", [RPM], resource="gpt-4")
    with api.acquire("key-1", "gpt-4", {"rpm": 95}):
        pass
    with pytest.raises(RateLimitExceeded):
        with api.acquire("key-1", "gpt-4", {"rpm": 10}):
            pass
    with api.meter() as m:
        warm(api)  # 5 tokens are left: a request for 1 must go through
    assert m.ops == ["update_item"]


def test_a_new_clients_rejection_is_one_read(api: Api) -> None:
    """A client with no image of the bucket (limits given with the call: no config read
    to ride along) reads it before it writes (flows/write/take.py): the shortage is seen there,
    and nothing is written."""
    with api.acquire("key-1", "gpt-4", {"rpm": 100}, limits=[RPM]):
        pass
    other = api.new_client()  # no memory of the exhaustion
    with other.meter() as m, pytest.raises(RateLimitExceeded) as caught:
        with other.acquire("key-1", "gpt-4", {"rpm": 1}, limits=[RPM]):
            pass
    assert (m.ops, m.round_trips, m.wcu) == (["get_item"], 1, 0)
    assert caught.value.violations[0].available == 0


def test_failed_condition_rejection_is_one_call(api: Api) -> None:
    with api.acquire("key-1", "gpt-4", {"rpm": 98}, limits=[RPM]):
        pass
    other = api.new_client()
    with other.acquire("key-1", "gpt-4", {"rpm": 1}, limits=[RPM]):
        pass  # its image: 1 token left
    with api.acquire("key-1", "gpt-4", {"rpm": 1}, limits=[RPM]):
        pass  # the last one, which the other client has not seen
    with other.meter() as m, pytest.raises(RateLimitExceeded) as caught:
        with other.acquire("key-1", "gpt-4", {"rpm": 1}, limits=[RPM]):
            pass
    assert (m.ops, m.round_trips) == (["update_item"], 1)
    assert caught.value.violations[0].available == 0


def test_a_refilled_bucket_takes_one_write_with_no_refill_of_its_own(
    api: Api, clock: Clock
) -> None:
    api.set_limits("key-1", [RPM], resource="gpt-4")
    with api.acquire("key-1", "gpt-4", {"rpm": 100}):
        pass
    clock.advance(6)  # 10 tokens refilled: time alone did it (the full-at time is ahead)
    with api.meter() as m:
        warm(api)
    assert (m.ops, m.round_trips, m.rcu) == (["update_item"], 1, 0)
    assert api.available("key-1", "gpt-4") == {"rpm": 9}


def test_read_then_write_when_speculative_writes_are_off(api: Api) -> None:
    slow = api.new_client(speculative_writes=False)
    slow.set_limits("key-1", [RPM], resource="gpt-4")
    warm(slow)
    with slow.meter() as m:
        warm(slow)
    assert (m.ops, m.round_trips) == (["get_item", "update_item"], 2)


def test_adjust_and_rollback_cost_one_write_per_entity(api: Api) -> None:
    api.create_entity("proj-1")
    api.create_entity("key-1", parent_id="proj-1", cascade=True)
    api.set_resource_defaults("gpt-4", [RPM, TPM])
    warm(api)
    with api.meter() as m:
        with api.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 500}) as lease:
            lease.adjust(tpm=100)
            lease.adjust(tpm=-20)
    assert m.ops == ["update_item"] * 4 and m.round_trips == 2
    with api.meter() as m, pytest.raises(KeyError):
        with api.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 500}):
            raise KeyError("boom")
    assert m.ops == ["update_item"] * 4 and m.round_trips == 2
    assert api.available("key-1", "gpt-4") == {"rpm": 98, "tpm": 10_000 - 580}


def test_cascade_parent_rejection_gives_the_child_back(api: Api) -> None:
    api.create_entity("proj-1")
    api.create_entity("key-1", parent_id="proj-1", cascade=True)
    api.set_limits("proj-1", [Limit.per_minute("rpm", 2)], resource="gpt-4")
    api.set_limits("key-1", [RPM], resource="gpt-4")
    warm(api)
    warm(api)
    with pytest.raises(RateLimitExceeded) as caught:
        warm(api)
    assert [(v.entity_id, v.limit_name) for v in caught.value.violations] == [("proj-1", "rpm")]
    assert api.available("key-1", "gpt-4") == {"rpm": 98}


def test_cascade_reports_violations_of_both_levels(api: Api) -> None:
    api.create_entity("proj-1")
    api.create_entity("key-1", parent_id="proj-1", cascade=True)
    api.set_limits("proj-1", [Limit.per_minute("rpm", 5)], resource="gpt-4")
    api.set_limits("key-1", [Limit.per_minute("rpm", 5)], resource="gpt-4")
    with api.acquire("key-1", "gpt-4", {"rpm": 4}):
        pass
    fresh = api.new_client()
    warm(fresh)  # learns cascade: the next acquire writes both levels at once
    with pytest.raises(RateLimitExceeded) as caught:
        with fresh.acquire("key-1", "gpt-4", {"rpm": 3}):
            pass
    assert sorted(v.entity_id for v in caught.value.violations) == ["key-1", "proj-1"]
    assert fresh.available("key-1", "gpt-4") == {"rpm": 0}
    assert fresh.available("proj-1", "gpt-4") == {"rpm": 0}


def test_config_cache_hits_misses_ttl_and_eviction(api: Api, clock: Clock) -> None:
    api.set_system_defaults([RPM])
    warm(api)
    stats = api.repo.get_cache_stats()
    assert (stats.misses, stats.size, stats.ttl_seconds) == (4, 4, 60)
    with api.meter() as m:
        warm(api)
    assert "batch_get_item" not in m.ops
    assert api.repo.get_cache_stats().hits == 4
    clock.advance(61)
    with api.meter() as m:
        warm(api)
    assert m.ops[0] == "batch_get_item"
    api.set_limits("key-1", [Limit.per_minute("rpm", 7)], resource="gpt-4")
    assert api.resolve_limits("key-1", "gpt-4").limits[0].capacity == 7
    api.run(api.repo.invalidate_config_cache())
    assert api.repo.get_cache_stats().size == 0


def test_config_cache_can_be_disabled(api: Api) -> None:
    nocache = api.new_client(config_cache_ttl=0)
    nocache.set_system_defaults([RPM])
    warm(nocache)
    with nocache.meter() as m:
        warm(nocache)
    assert m.ops == ["batch_get_item", "update_item"]
    assert nocache.repo.get_cache_stats().size == 0


@pytest.mark.parametrize(
    ("entity", "consume", "message"),
    [
        ("", {"rpm": 1}, "non-empty"),
        ("a#b", {"rpm": 1}, "'#'"),
        ("a\x00b", {"rpm": 1}, "control character"),
        ("x" * 257, {"rpm": 1}, "maximum is 256"),
        ("k", {"rpm": -1}, "between 0"),
        ("k", {"rpm": 1.5}, "whole number"),
        ("k", {"wcu": 1}, "reserved"),
        ("k", {"tpm": 1}, "not configured"),
        ("k", {"rpm": 101}, "can never be granted"),
        ("k", {"rpm": 0}, "at least one token"),
    ],
)
def test_bad_input_is_refused_before_any_write(
    api: Api, entity: str, consume: dict[str, object], message: str
) -> None:
    api.set_system_defaults([RPM])
    with api.meter() as m, pytest.raises(ValidationError, match=message):
        with api.acquire(entity, "gpt-4", consume):
            pass
    assert not any(op in ("put_item", "update_item") for op in m.ops)


def test_bad_entities_are_refused_with_nothing_written(api: Api) -> None:
    with pytest.raises(Exception, match="does not exist"):
        api.create_entity("key-1", parent_id="nobody")
    with pytest.raises(ValidationError, match="own parent"):
        api.create_entity("key-1", parent_id="key-1")
    with pytest.raises(ValidationError, match="cascade=True needs a parent"):
        api.create_entity("key-1", cascade=True)
    with pytest.raises(ValidationError, match="reserved"):
        api.set_limits("key-1", [Limit.per_minute("wcu", 5)])
    assert api.list_entities() == []
