"""Audit events: one per configuration change, written with the change or not at all.

Both faces (sync on in-process moto, async on a moto server); STS answers from moto.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from zae_limiter import EntityExistsError, Limit, RateLimiterUnavailable, ValidationError, keys

if TYPE_CHECKING:
    from tests.conftest import Api, Clock

RPM = Limit.per_minute("rpm", 100)


def actions(api: Api, **kwargs: Any) -> list[tuple[str, str | None, str | None]]:
    return [(e.action, e.entity_id, e.resource) for e in api.get_audit_events(**kwargs)]


def test_each_kind_of_change_records_one_event(api: Api, clock: Clock) -> None:
    api.create_entity("org")
    api.create_entity("acme", "Acme", parent_id="org")
    api.set_limits("acme", [RPM], resource="gpt-4")
    api.set_limits("acme", [RPM])
    api.set_resource_defaults("gpt-4", [RPM])
    api.set_system_defaults([RPM], on_unavailable="allow")
    api.update_entity("acme", cascade=True)
    assert api.delete_limits("acme", "gpt-4") is True
    assert api.delete_limits("acme", "gpt-4") is False  # nothing stored: no change, no event
    api.delete_resource_defaults("gpt-4")
    api.delete_system_defaults()
    assert actions(api) == [
        ("create_entity", "org", None),
        ("create_entity", "acme", None),
        ("set_limits", "acme", "gpt-4"),
        ("set_limits", "acme", None),
        ("set_limits", None, "gpt-4"),
        ("set_limits", None, None),
        ("update_entity", "acme", None),
        ("delete_limits", "acme", "gpt-4"),
        ("delete_limits", None, "gpt-4"),
        ("delete_limits", None, None),
    ]
    by_entity = actions(api, entity_id="acme")
    assert [a for a, _e, _r in by_entity] == [
        "create_entity", "set_limits", "set_limits", "update_entity", "delete_limits"
    ]  # fmt: skip


def test_event_says_who_when_and_the_values_around_the_change(api: Api, clock: Clock) -> None:
    api.create_entity("acme")
    api.set_limits("acme", [RPM], resource="gpt-4")
    clock.advance(5)
    api.set_limits("acme", [Limit.per_minute("rpm", 50)], resource="gpt-4")
    event = api.get_audit_events("acme")[-1]
    assert event.at_ms == clock.now_ms
    assert event.principal.startswith("arn:aws:")  # moto's STS answers GetCallerIdentity
    assert event.before == {"limits": [{"name": "rpm", "capacity": 100, "refill_amount": 100,
                                        "refill_period_seconds": 60}]}  # fmt: skip
    assert event.after is not None and event.after["limits"][0]["capacity"] == 50
    assert api.get_audit_events("acme", since_ms=clock.now_ms) == [event]
    assert len(api.get_audit_events("acme", limit=1)) == 1


def test_given_principal_is_used_and_sts_is_not_asked(api: Api) -> None:
    other = api.new_client(principal="alice@example.com", audit_retention_days=7)
    other.create_entity("acme")
    (event,) = other.get_audit_events("acme")
    assert event.principal == "alice@example.com"
    item = other.run(other.repo.run(_raw_audit_items(other)))[0]
    assert int(item["ttl"]["N"]) == event.at_ms // 1000 + 7 * 86400


def _raw_audit_items(api: Api) -> Any:
    from zae_limiter import keys
    from zae_limiter.flows import Call, paginate

    state = api.repo.state
    query = keys.audit_query_entity(state.table, state.namespace, "acme", 0)
    return paginate(Call("query", query))


def test_acquire_writes_no_audit_event(api: Api) -> None:
    api.create_entity("acme")
    api.set_limits("acme", [RPM])
    before = api.get_audit_events()
    for _ in range(3):
        with api.acquire("acme", "gpt-4", {"rpm": 1}):
            pass
    with api.acquire("solo", "gpt-4", {"rpm": 1}, limits=[RPM]):
        pass
    assert api.get_audit_events() == before


def test_failed_change_writes_neither_the_change_nor_the_event(api: Api) -> None:
    api.create_entity("acme")
    with pytest.raises(EntityExistsError):
        api.create_entity("acme", "again")
    with pytest.raises(ValidationError):
        api.set_limits("acme", [RPM, RPM])
    assert actions(api) == [("create_entity", "acme", None)]


def failing_event_write_leaves_no_change(api: Api) -> None:
    """DynamoDB refuses the write of the event (injected: a transaction carrying an audit
    item is throttled; any other write passes): the change is not written either."""
    api.create_entity("acme")
    refused = refuse_event_writes(api)
    with pytest.raises(RateLimiterUnavailable):
        api.set_limits("acme", [RPM])
    with pytest.raises(RateLimiterUnavailable):
        api.update_entity("acme", name="renamed")
    with pytest.raises(RateLimiterUnavailable):
        api.delete_entity("acme")
    assert len(refused) == 3
    assert api.get_limits("acme") == ()
    entity = api.get_entity("acme")
    assert entity is not None, "deleted without its event"
    assert entity.name is None
    assert actions(api) == [("create_entity", "acme", None)]


def test_a_failing_event_write_leaves_no_change_and_no_event(api: Api) -> None:
    failing_event_write_leaves_no_change(api)


def refuse_event_writes(api: Api) -> list[int]:
    """Every TransactWriteItems that carries an audit event fails as a throttled request
    would; returns the list of refusals (their item counts)."""
    from botocore.exceptions import ClientError

    refused: list[int] = []

    def refuse(params: dict[str, Any], **_kwargs: Any) -> None:
        body = params["body"]
        items = json.loads(body.decode() if isinstance(body, bytes) else body)["TransactItems"]
        sort_keys = [i["Put"]["Item"][keys.SK]["S"] for i in items if "Put" in i]
        if any(sk.startswith(keys.AUDIT_SK_PREFIX) for sk in sort_keys):
            refused.append(len(items))
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "injected"}},
                "TransactWriteItems",
            )

    api.repo.client.meta.events.register("before-call.dynamodb.TransactWriteItems", refuse)
    return refused


def test_concurrent_change_is_seen_and_before_is_what_was_replaced(api: Api) -> None:
    """Another writer changes the item between our read and our write: the transaction's
    condition fails, we read again, and the event's "before" is the other writer's value."""
    from zae_limiter import SyncRateLimiter, SyncRepository

    api.create_entity("acme")
    api.set_limits("acme", [RPM])
    # A sync client (callable from inside a botocore hook) on the same table and engine.
    repo = api.repo
    other = SyncRateLimiter(
        SyncRepository.open(name=repo.table_name, endpoint_url=repo.where[1], principal="bob")
    )
    sneaked: list[bool] = []

    def sneak_in(**_kwargs: Any) -> None:
        if not sneaked:
            sneaked.append(True)
            other.set_limits("acme", [Limit.per_minute("rpm", 7)])

    repo.client.meta.events.register("before-call.dynamodb.TransactWriteItems", sneak_in)
    api.set_limits("acme", [Limit.per_minute("rpm", 9)])
    ours = [e for e in api.get_audit_events("acme") if e.principal != "bob"][-1]
    (theirs,) = [e for e in api.get_audit_events("acme") if e.principal == "bob"]
    assert theirs.after is not None and theirs.after["limits"][0]["capacity"] == 7
    assert ours.before is not None and ours.before["limits"][0]["capacity"] == 7
    assert api.get_limits("acme")[0].capacity == 9


def test_update_entity_changes_links_and_bucket_shards(api: Api) -> None:
    api.create_entity("org")
    api.create_entity("acme")
    api.set_limits("org", [RPM])
    api.set_limits("acme", [RPM])
    with api.acquire("acme", "gpt-4", {"rpm": 1}):
        pass
    updated = api.update_entity("acme", parent_id="org", cascade=True, name="Acme")
    assert (updated.parent_id, updated.cascade, updated.name) == ("org", True, "Acme")
    fresh = api.new_client()
    with fresh.acquire("acme", "gpt-4", {"rpm": 10}):
        pass
    assert fresh.available("org", "gpt-4")["rpm"] == 90  # the cascade took from the parent
    (shard,) = fresh.get_shards("acme", "gpt-4")
    assert shard.shard_id == 0
    with pytest.raises(ValidationError):
        api.update_entity("org", parent_id="acme")  # a cycle
    detached = api.update_entity("acme", parent_id=None)
    assert (detached.parent_id, detached.cascade) == (None, False)


def test_delete_entity_records_what_it_removed(api: Api) -> None:
    api.create_entity("acme", "Acme")
    api.set_limits("acme", [RPM], resource="gpt-4")
    with api.acquire("acme", "gpt-4", {"rpm": 1}):
        pass
    api.delete_entity("acme")
    event = api.get_audit_events("acme")[-1]
    assert event.action == "delete_entity"
    assert event.before is not None
    assert event.before["entity"] == {"name": "Acme", "parent_id": None, "cascade": False}
    assert event.before["limits"]["gpt-4"][0]["name"] == "rpm"
    assert api.get_entity("acme") is None
    assert api.get_shards("acme", "gpt-4") == []


def test_retention_must_be_positive(api: Api) -> None:
    with pytest.raises(ValidationError, match="audit_retention_days"):
        api.new_client(audit_retention_days=0)
