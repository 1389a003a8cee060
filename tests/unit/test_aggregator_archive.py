"""The archive plan, pure: which records are expiries, how they group, and stable keys."""

from __future__ import annotations

from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.archive import decode, plan_archive
from zae_limiter.models import AuditEvent

DAY_MS = 86_400_000
T0 = 1_780_000_000_000  # 2026-05-28
TTL_PROCESS = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def event(event_id: str, ns: str = "ns", at_ms: int = T0) -> AuditEvent:
    return AuditEvent(event_id, at_ms, "alice", "create_entity", ns, entity_id="acme")


def removed(ev: AuditEvent, seq: int, who: dict[str, str] | None = TTL_PROCESS) -> Any:
    item = keys.audit_item(ev, retention_days=90)
    record: dict[str, Any] = {
        "eventName": "REMOVE",
        "dynamodb": {"OldImage": item, "SequenceNumber": str(seq)},
    }
    if who is not None:
        record["userIdentity"] = who
    return record


def test_one_object_per_namespace_and_day_with_the_events_of_each() -> None:
    records = [
        removed(event("a"), 1),
        removed(event("b", at_ms=T0 + DAY_MS), 2),
        removed(event("c", ns="other"), 3),
        removed(event("d"), 4),
    ]
    plan = plan_archive(records)
    assert [(o.key.rsplit("/", 1)[0], o.sequence_numbers) for o in plan.objects] == [
        ("audit/namespace=ns/date=2026-05-28", ("1", "4")),
        ("audit/namespace=ns/date=2026-05-29", ("2",)),
        ("audit/namespace=other/date=2026-05-28", ("3",)),
    ]
    assert [e.event_id for e in decode(plan.objects[0].body)] == ["a", "d"]
    assert decode(plan.objects[0].body)[0] == event("a")


def test_the_same_events_make_the_same_key_and_bytes_in_any_order() -> None:
    one = plan_archive([removed(event("a"), 1), removed(event("b"), 2)]).objects
    two = plan_archive([removed(event("b"), 7), removed(event("a"), 9)]).objects
    assert [o.key for o in one] == [o.key for o in two]
    assert [o.body for o in one] == [o.body for o in two]
    other = plan_archive([removed(event("a"), 1)]).objects
    assert other[0].key != one[0].key


def test_only_expiries_of_audit_events_are_archived() -> None:
    user = {"type": "AssumedRole", "principalId": "AROA:bob"}
    modify = {**removed(event("m"), 3), "eventName": "MODIFY"}
    not_audit = removed(event("x"), 4)
    not_audit["dynamodb"]["OldImage"][keys.A_KIND] = {"S": "entity"}
    records = [removed(event("u"), 1, who=user), removed(event("n"), 2, who=None),
               modify, not_audit]  # fmt: skip
    plan = plan_archive(records)
    assert plan.objects == [] and plan.failed == []


def test_an_expired_audit_item_that_cannot_be_read_is_reported_failed() -> None:
    broken = removed(event("a"), 5)
    del broken["dynamodb"]["OldImage"][keys.A_AT]
    plan = plan_archive([broken, removed(event("b"), 6)])
    assert plan.failed == ["5"]
    assert [o.sequence_numbers for o in plan.objects] == [("6",)]


def test_the_handler_archives_only_when_a_bucket_is_named() -> None:
    from zae_limiter.aggregator.handler import archive_from_env

    assert archive_from_env({}) is None
    archive = archive_from_env({"ZAEL_AUDIT_ARCHIVE_BUCKET": "trail"},
                               endpoint_url="http://127.0.0.1:1")  # fmt: skip
    assert archive is not None and archive.bucket == "trail"
    again = archive_from_env({"ZAEL_AUDIT_ARCHIVE_BUCKET": "trail"},
                             endpoint_url="http://127.0.0.1:1")  # fmt: skip
    assert again is archive  # kept while the Lambda is warm
