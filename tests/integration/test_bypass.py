"""An entity with a bypass: its acquires take nothing and never reject, are counted as
`bypassed`, and turning it on or off is audited; both faces."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from zae_limiter import Limit, RateLimitExceeded

if TYPE_CHECKING:
    from tests.conftest import Api

RPM = [Limit.per_minute("rpm", 10)]


def test_a_bypassed_entity_takes_nothing_and_is_counted(api: Api) -> None:
    api.set_limits("svc", RPM, resource="gpt-4")
    api.create_entity("svc", bypass=True)
    client = api.new_client(reserve=False)
    for _ in range(25):  # far past the limit
        with client.acquire("svc", "gpt-4", {"rpm": 1}):
            pass
    assert client.limiter.get_stats().resources["gpt-4"].bypassed == 25
    assert client.list_resources("svc") == []  # no bucket was ever written


def test_turning_the_bypass_off_limits_again_and_is_audited(api: Api) -> None:
    api.set_limits("svc", RPM, resource="gpt-4")
    api.create_entity("svc", bypass=True)
    api.update_entity("svc", bypass=False)
    events = api.get_audit_events("svc")
    assert [e.action for e in events] == ["set_limits", "create_entity", "update_entity"]
    assert events[1].after["bypass"] is True
    assert events[-1].before["bypass"] is True and "bypass" not in events[-1].after
    client = api.new_client(reserve=False)
    with client.acquire("svc", "gpt-4", {"rpm": 10}):
        pass
    with pytest.raises(RateLimitExceeded):
        with client.acquire("svc", "gpt-4", {"rpm": 1}):
            pass
    assert client.limiter.get_stats().resources["gpt-4"].bypassed == 0


def test_a_client_that_knows_the_entity_only_from_its_buckets_learns_the_bypass(
    api: Api,
) -> None:
    """Limits given with the call: the client never reads the entity's record. The
    update writes the bypass onto the existing buckets, where that client learns it."""
    api.create_entity("svc")
    with api.acquire("svc", "gpt-4", {"rpm": 10}, limits=RPM):
        pass  # the bucket exists, empty
    api.update_entity("svc", bypass=True)
    fresh = api.new_client(reserve=False)
    with pytest.raises(RateLimitExceeded):  # its first look is the bucket: empty
        with fresh.acquire("svc", "gpt-4", {"rpm": 1}, limits=RPM):
            pass
    for _ in range(5):
        with fresh.acquire("svc", "gpt-4", {"rpm": 1}, limits=RPM):
            pass
    assert fresh.limiter.get_stats().resources["gpt-4"].bypassed == 5


def test_a_client_that_knew_the_entity_sees_another_clients_update_within_the_cache_ttl(
    api: Api, clock: Any
) -> None:
    """The record is read again with the entity's stored limits once their config cache
    entry expires: a bypass (or its end) set by another client reaches a client that had
    learned the entity before, without a restart."""
    api.set_limits("svc", RPM, resource="gpt-4")
    api.create_entity("svc")
    old = api.new_client(reserve=False, config_cache_ttl=60)
    with old.acquire("svc", "gpt-4", {"rpm": 10}):
        pass  # knows the entity from its record, bucket empty
    api.update_entity("svc", bypass=True)
    clock.advance(30)  # still within the cache entry: the old facts
    with pytest.raises(RateLimitExceeded):
        with old.acquire("svc", "gpt-4", {"rpm": 10}):
            pass
    clock.advance(31)
    for _ in range(3):
        with old.acquire("svc", "gpt-4", {"rpm": 10}):
            pass
    assert old.limiter.get_stats().resources["gpt-4"].bypassed == 3
    api.update_entity("svc", bypass=False)
    clock.advance(61)
    with old.acquire("svc", "gpt-4", {"rpm": 10}):
        pass  # refilled over the 2 minutes; limited again from here
    with pytest.raises(RateLimitExceeded):
        with old.acquire("svc", "gpt-4", {"rpm": 1}):
            pass
