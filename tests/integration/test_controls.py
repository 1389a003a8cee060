"""Operator controls on moto, both faces: reset to full and top up, on every shard,
audited with who and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from zae_limiter import Limit, RateLimitExceeded, ValidationError

if TYPE_CHECKING:
    from tests.conftest import Api, Clock

RPM = [Limit.per_minute("rpm", 100)]
TWO = [Limit.per_minute("rpm", 100), Limit.per_minute("tpm", 10_000)]


def drain(api: Api, n: int, limits: list[Limit] = RPM) -> None:
    with api.acquire("k1", "gpt-4", {"rpm": n}, limits=limits):
        pass


def tokens(api: Api) -> dict[str, int]:
    return api.available("k1", "gpt-4", limits=RPM)


def test_reset_fills_the_bucket_and_records_who_and_why(api: Api, clock: Clock) -> None:
    client = api.new_client(reserve=False, principal="ops@example.com")
    with client.acquire("k1", "gpt-4", {"rpm": 100}, limits=RPM):
        pass
    with pytest.raises(RateLimitExceeded):
        with client.acquire("k1", "gpt-4", {"rpm": 1}, limits=RPM):
            pass
    assert client.reset_bucket("k1", "gpt-4", reason="incident 42") == 1
    assert client.available("k1", "gpt-4", limits=RPM) == {"rpm": 100}
    event = client.get_audit_events("k1")[-1]
    assert (event.action, event.resource, event.principal) == (
        "reset_bucket", "gpt-4", "ops@example.com"
    )  # fmt: skip
    assert event.after == {"reason": "incident 42", "shards": 1}
    assert event.before == {"tokens": {"rpm": 0}}
    # a take after the reset is a take like any other
    with client.acquire("k1", "gpt-4", {"rpm": 30}, limits=RPM):
        pass
    assert client.available("k1", "gpt-4", limits=RPM) == {"rpm": 70}


def test_reset_names_the_principal_given_per_call(api: Api) -> None:
    client = api.new_client(reserve=False, principal="service")
    with client.acquire("k1", "gpt-4", {"rpm": 10}, limits=RPM):
        pass
    client.reset_bucket("k1", "gpt-4", principal="alice", reason="asked by support")
    assert client.get_audit_events("k1")[-1].principal == "alice"


def test_top_up_grants_exactly_the_amount_and_not_a_limit(api: Api) -> None:
    client = api.new_client(reserve=False)
    with client.acquire("k1", "gpt-4", {"rpm": 80, "tpm": 9_000}, limits=TWO):
        pass
    done = client.top_up("k1", "gpt-4", {"rpm": 25}, reason="goodwill")
    assert done.granted == {"rpm": 25} and done.refused == {}
    assert client.available("k1", "gpt-4", limits=TWO) == {"rpm": 45, "tpm": 1_000}
    event = client.get_audit_events("k1")[-1]
    assert event.action == "top_up"
    assert event.after == {"reason": "goodwill", "granted": {"rpm": 25}, "asked": {"rpm": 25}}
    assert client.get_limits("k1", "gpt-4") == ()  # the stored limits are untouched


def test_top_up_past_full_refuses_what_does_not_fit(api: Api) -> None:
    client = api.new_client(reserve=False)
    with client.acquire("k1", "gpt-4", {"rpm": 10}, limits=RPM):
        pass
    done = client.top_up("k1", "gpt-4", {"rpm": 50})
    assert done.granted == {"rpm": 10} and done.refused == {"rpm": 40}
    assert client.available("k1", "gpt-4", limits=RPM) == {"rpm": 100}
    nothing = client.top_up("k1", "gpt-4", {"rpm": 5})
    assert nothing.granted == {"rpm": 0} and nothing.shards == 0
    assert client.get_audit_events("k1")[-1].after["granted"] == {"rpm": 10}  # no event


def test_controls_on_every_shard_of_a_doubled_bucket(api: Api, clock: Clock) -> None:
    hot = api.new_client(partition_wcu=10, reserve=False)
    limits = [Limit.per_minute("rpm", 6000)]
    for i in range(40):  # 25 writes a second on a 10/s partition: it doubles
        if i:
            clock.advance(0.04)
        with hot.acquire("k1", "gpt-4", {"rpm": 50}, limits=limits):
            pass
    for _ in range(20):
        clock.advance(0.11)
        with hot.acquire("k1", "gpt-4", {"rpm": 50}, limits=limits):
            pass
    shards = hot.get_shards("k1", "gpt-4")
    assert len(shards) >= 2
    before = hot.available("k1", "gpt-4", limits=limits)["rpm"]
    done = hot.top_up("k1", "gpt-4", {"rpm": 301})
    assert done.granted == {"rpm": 301}
    after = hot.available("k1", "gpt-4", limits=limits)["rpm"]
    assert after - before in (300, 301, 302)  # whole tokens of each shard rounded down
    assert hot.reset_bucket("k1", "gpt-4") == len(shards)
    assert hot.available("k1", "gpt-4", limits=limits) == {"rpm": 6000}


def test_controls_refuse_what_is_not_there(api: Api) -> None:
    client = api.new_client(reserve=False)
    with pytest.raises(ValidationError, match="no bucket"):
        client.reset_bucket("nobody", "gpt-4")
    drain(client, 1)
    with pytest.raises(ValidationError, match="no limit"):
        client.top_up("k1", "gpt-4", {"tpm": 5})
    with pytest.raises(ValidationError, match="positive"):
        client.top_up("k1", "gpt-4", {"rpm": 0})


def reset_with_an_acquire_in_between(table_name: str, clock: Clock) -> None:
    """An acquire lands after the reset read the bucket and before it wrote: the reset
    is not applied to what it did not see; it plans again, and its event's "before" is
    exactly what it replaced."""
    from moto import mock_aws

    from zae_limiter import SyncRateLimiter, SyncRepository
    from zae_limiter.flows.offpath import controls

    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        mine = SyncRepository.open(name=table_name, create_table=True, clock=clock, reserve=False)
        theirs = SyncRepository.open(name=table_name, clock=clock, reserve=False)
        ops, other = SyncRateLimiter(mine), SyncRateLimiter(theirs)
        with ops.acquire("k1", "gpt-4", {"rpm": 40}, limits=RPM):
            pass
        read_items = controls.read_items

        def read_then_take(*args: object) -> object:
            items = yield from read_items(*args)  # type: ignore[arg-type]
            with other.acquire("k1", "gpt-4", {"rpm": 25}, limits=RPM):
                pass
            return items

        patch.setattr(controls, "read_items", read_then_take)
        assert ops.reset_bucket("k1", "gpt-4", reason="in between") == 1
        assert ops.get_audit_events("k1")[-1].before == {"tokens": {"rpm": 35}}
        assert ops.available("k1", "gpt-4", limits=RPM) == {"rpm": 100}
        mine.close()
        theirs.close()


def test_reset_replans_when_an_acquire_lands_in_between(table_name: str, clock: Clock) -> None:
    reset_with_an_acquire_in_between(table_name, clock)


def test_a_reset_leaves_what_reserves_hold_held(api: Api) -> None:
    """Tokens a client holds in a token reserve are its own until it spends or returns
    them: a reset fills the rest of the bucket, never the reserve a second time."""
    slow = [Limit.custom("rpm", 100, 1, 3600)]  # nothing refills while the test runs
    for _ in range(5):  # hot: this client takes a reserve
        with api.acquire("k", "gpt", {"rpm": 1}, limits=slow):
            pass
    held = sum(s.reserved.get("rpm", 0) for s in api.get_shards("k", "gpt"))
    assert held > 0
    api.reset_bucket("k", "gpt")
    assert api.available("k", "gpt", limits=slow) == {"rpm": 100 - held}
    # The reserve goes back: its unspent tokens fill the bucket (never past full), and
    # what it served before the reset (some of the 5) is charged now.
    api.run(api.repo.return_reserves(True))
    assert 95 <= api.available("k", "gpt", limits=slow)["rpm"] <= 100
