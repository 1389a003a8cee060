"""Audit keys and the change flows, driven with canned results (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit._flowkit import NS, RPM, T0, TABLE, failed, make_state, ok
from zae_limiter import keys
from zae_limiter.errors import CONCURRENT_CHANGE, EntityExistsError, RateLimiterUnavailable
from zae_limiter.flows import Call, Result
from zae_limiter.flows.records import config, entities
from zae_limiter.flows.records.audit import MAX_ATTEMPTS, Auditor
from zae_limiter.limits import Limit
from zae_limiter.models import AuditEvent, Entity


def auditor() -> Auditor:
    ids = iter(range(100))
    return Auditor("alice", T0, 90, lambda: f"id{next(ids):02d}")


def drive(flow: Any, answers: list[Result]) -> tuple[list[Any], Any]:
    """Run a flow on canned results; the requests it made, and what it returned."""
    requests = [next(flow)]
    try:
        for answer in answers:
            requests.append(flow.send(answer))
    except StopIteration as done:
        return requests, done.value
    raise AssertionError(f"the flow wanted more: {requests[-1]!r}")


def test_event_item_round_trip_and_keys() -> None:
    event = AuditEvent("id1", T0, "alice", "set_limits", NS, "acme", "gpt-4", None, {"a": 1})
    item = keys.audit_item(event, 7)
    assert item[keys.PK] == {"S": "ns/AUDIT#acme"}
    assert item[keys.SK] == {"S": f"#AUDIT#{T0:013d}#id1"}
    assert item[keys.GSI4PK] == {"S": NS}
    assert item[keys.TTL] == {"N": str(T0 // 1000 + 7 * 86400)}
    assert keys.decode_audit(item) == event
    system = keys.audit_item(AuditEvent("id2", 5, "bob", "set_limits", NS), None)
    assert system[keys.PK] == {"S": "ns/AUDIT#"} and keys.TTL not in system
    # Zero-padded times sort as numbers do.
    assert keys.audit_sk(999, "x") < keys.audit_sk(1000, "x")


def test_config_level_from_each_config_key() -> None:
    def level(item_key: keys.Item) -> Any:
        return keys.config_level(item_key)

    assert level(keys.entity_config_key(NS, "acme", "gpt-4")) == ("acme", "gpt-4")
    assert level(keys.entity_config_key(NS, "acme", keys.DEFAULT_RESOURCE)) == ("acme", None)
    assert level(keys.resource_config_key(NS, "gpt-4")) == (None, "gpt-4")
    assert level(keys.system_config_key(NS)) == (None, None)
    assert level(keys.entity_key(NS, "acme")) is None
    assert level(keys.bucket_key(NS, "acme", "gpt-4", 0)) is None
    assert level(keys.usage_key(NS, "acme", "gpt-4", "hourly", "2026")) is None


def test_unchanged_condition() -> None:
    assert keys.unchanged(None, ("x",))[0] == "attribute_not_exists(#pk)"
    expression, names, values = keys.unchanged({"a": {"N": "1"}}, ("a", "b"))
    assert expression == "attribute_exists(#pk) AND #a0 = :v0 AND attribute_not_exists(#a1)"
    assert names == {"#pk": keys.PK, "#a0": "a", "#a1": "b"}
    assert values == {":v0": {"N": "1"}}


def stored_config(created: int, capacity: int) -> dict[str, Any]:
    limit = Limit.per_minute("rpm", capacity)
    return keys.config_item(
        keys.entity_config_key(NS, "acme", "gpt-4"), [limit], NS, created, "entity_config"
    )


def test_set_limits_reads_again_when_the_item_moved() -> None:
    flow = config.set_limits(make_state(), "acme", "gpt-4", [RPM], T0, auditor())
    first, second = stored_config(1, 5), stored_config(2, 7)
    requests, _ = drive(
        flow,
        [Result({"Item": first}), failed(None), Result({"Item": second}), ok()],
    )
    ops = [r.op for r in requests]
    assert ops == ["get_item", "transact_write_items", "get_item", "transact_write_items"]
    put, event = requests[3].params["TransactItems"]
    assert put["Put"]["ConditionExpression"] == "attribute_exists(#pk) AND #a0 = :v0"
    assert put["Put"]["ExpressionAttributeValues"] == {":v0": {"N": "2"}}
    assert event["Put"]["Item"][keys.A_BEFORE]["S"].count('"capacity": 7') == 1
    assert event["Put"]["TableName"] == TABLE


def test_set_limits_gives_up_after_repeated_interference() -> None:
    flow = config.set_limits(make_state(), "acme", None, [RPM], T0, auditor())
    answers: list[Result] = []
    for i in range(MAX_ATTEMPTS):
        answers += [Result({"Item": stored_config(i, 5)}), failed(None)]
    with pytest.raises(RateLimiterUnavailable, match="kept changing"):
        drive(flow, answers)


def test_delete_of_nothing_writes_nothing() -> None:
    flow = config.delete_limits(make_state(), None, "gpt-4", auditor())
    requests, deleted = drive(flow, [Result({})])
    assert deleted is False and [r.op for r in requests] == ["get_item"]


def test_create_entity_is_one_transaction_and_exists_is_an_error() -> None:
    flow = entities.create_entity(make_state(), "acme", None, None, False, auditor())
    requests, entity = drive(flow, [ok()])
    assert entity == Entity("acme", None, None, False, T0)
    (call,) = requests
    assert isinstance(call, Call) and call.op == "transact_write_items"
    put, event = call.params["TransactItems"]
    assert put["Put"]["ConditionExpression"] == "attribute_not_exists(#pk)"
    assert event["Put"]["Item"][keys.A_ACTION] == {"S": "create_entity"}
    with pytest.raises(EntityExistsError):
        drive(entities.create_entity(make_state(), "acme", None, None, False, auditor()),
              [failed(None)])  # fmt: skip


def _entity_item(name: str) -> dict[str, Any]:
    return keys.encode_entity(NS, Entity("acme", name, None, False, T0))


def test_update_entity_reads_again_after_interference_and_reports_what_it_replaced() -> None:
    flow = entities.update_entity(
        make_state(), "acme", "new", entities.UNSET, entities.UNSET, auditor()
    )
    answers = [Result({"Item": _entity_item("first")}), failed(None)]
    answers += [Result({"Item": _entity_item("second")}), ok()]
    requests, entity = drive(flow, answers)
    assert [r.op for r in requests] == ["get_item", "transact_write_items"] * 2
    assert requests[0].params["ConsistentRead"] is True
    _put, event = requests[-1].params["TransactItems"]
    assert '"second"' in event["Put"]["Item"][keys.A_BEFORE]["S"]
    assert entity.name == "new"


def test_update_entity_gives_up_after_repeated_interference() -> None:
    flow = entities.update_entity(
        make_state(), "acme", "new", entities.UNSET, entities.UNSET, auditor()
    )
    answers: list[Result] = []
    for i in range(MAX_ATTEMPTS):
        answers += [Result({"Item": _entity_item(f"n{i}")}), failed(None)]
    with pytest.raises(RateLimiterUnavailable, match="kept changing") as caught:
        drive(flow, answers)
    assert caught.value.code == CONCURRENT_CHANGE
