"""`zae-limiter namespace list | show | delete`: a namespace with every kind of item, deleted
after an interruption, and another namespace left exactly as it was."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest

from zae_limiter import Limit, RateLimiterUnavailable, keys
from zae_limiter.models import UsageSnapshot

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

RPM = Limit.per_minute("rpm", 100)


def populate(zae: Zae, entities: int = 3) -> None:
    """Entities with limits, bucket shards, a usage snapshot and audit events."""
    limiter = zae.limiter()
    limiter.set_resource_defaults("gpt-4", [RPM])
    for i in range(entities):
        limiter.create_entity(f"e{i}")
        limiter.set_limits(f"e{i}", [RPM])
        with limiter.acquire(f"e{i}", "gpt-4", {"rpm": 1}):
            pass
    snapshot = UsageSnapshot("e0", "gpt-4", "hourly", "2026-11-26T03:00Z", {"rpm": 1000}, 1)
    update = keys.usage_update(zae.table, zae.namespace, snapshot, {}, 2_000_000_000)
    boto3.client("dynamodb").update_item(**update)


def table_items(table: str) -> dict[tuple[str, str], Any]:
    client = boto3.client("dynamodb")
    items: dict[tuple[str, str], Any] = {}
    for page in client.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            items[(item["PK"]["S"], item["SK"]["S"])] = item
    return items


def outside(items: dict[tuple[str, str], Any], ns: str) -> dict[tuple[str, str], Any]:
    return {k: v for k, v in items.items() if not k[0].startswith(f"{ns}/")}


def test_list_show_and_delete_after_an_interruption(zae: Zae) -> None:
    from tests.cli.conftest import Zae

    other = Zae(zae.table, zae.namespace + "-other")
    populate(zae, entities=8)  # 43 items: more than one batch of 25
    populate(other, entities=1)
    ns = zae.namespace

    listed = zae("namespace", "list", "-o", "json")
    assert listed.code == 0, listed.stderr
    assert {ns, other.namespace} <= set(listed.json()["namespaces"])
    assert "_" not in listed.json()["namespaces"]

    shown = zae("namespace", "show", ns, "-o", "json").json()
    assert shown == {
        "namespace": ns,
        "entities": 8,
        "limit_configs": 9,  # eight entity defaults and one resource default
        "buckets": 8,
        "bucket_shards": 8,
        "usage_snapshots": 1,
        "audit_events": 17,
        "items": 43,
    }
    human = zae("namespace", "show", ns)
    assert "bucket shards" in human.stdout and "audit events" in human.stdout

    before = table_items(zae.table)
    interrupted = zae.limiter()
    fail_after_batches(interrupted, 1)
    with pytest.raises(RateLimiterUnavailable):
        interrupted.delete_namespace(ns, wcu_per_second=1_000_000)
    partly = table_items(zae.table)
    left = [k for k in partly if k[0].startswith(f"{ns}/")]
    assert len(left) == 43 - 25  # one batch went through, then the failure

    declined = zae("namespace", "delete", ns, input="n\n")
    assert declined.code == 1 and "Delete namespace" in declined.stderr

    done = zae("namespace", "delete", ns, "--yes", "--wcu-per-second", "100000", "-o", "json")
    assert done.code == 0, done.stderr
    assert done.json() == {"namespace": ns, "deleted_items": len(left)}
    after = table_items(zae.table)
    assert [k for k in after if k[0].startswith(f"{ns}/")] == []
    # Nothing outside the namespace was touched; table-level audit events were added.
    assert not_table_audit(outside(after, ns)) == not_table_audit(outside(before, ns))
    assert any(k[0].startswith(f"{other.namespace}/") for k in after)
    assert ns not in zae("namespace", "list", "-o", "json").json()["namespaces"]

    again = zae("namespace", "delete", ns, "--yes")
    assert again.code == 0 and "nothing deleted" in again.stdout
    table_events = zae("audit", "list", "--table-level", "-o", "json").json()["events"]
    deletions = [e for e in table_events if e["action"] == "delete_namespace"]
    assert [e["before"]["namespace"] for e in deletions][-2:] == [ns, ns]


def not_table_audit(items: dict[tuple[str, str], Any]) -> dict[tuple[str, str], Any]:
    table_audit = keys.audit_pk(keys.TABLE_NAMESPACE, None)
    return {k: v for k, v in items.items() if k[0] != table_audit}


def fail_after_batches(limiter: Any, allowed: int) -> None:
    """The limiter's BatchWriteItem calls fail after `allowed` of them went through."""
    from botocore.exceptions import ClientError

    calls = [0]

    def maybe_fail(**_kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] > allowed:
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "injected"}},
                "BatchWriteItem",
            )

    limiter.repository.client.meta.events.register(
        "before-call.dynamodb.BatchWriteItem", maybe_fail
    )


def test_show_of_an_empty_namespace_and_bad_names(zae: Zae) -> None:
    shown = zae("namespace", "show", "nothing-here", "-o", "json").json()
    assert shown["items"] == 0
    bad = zae("namespace", "delete", "_", "--yes")
    assert bad.code == 2 and "invalid namespace" in bad.stderr


def test_delete_shows_progress_on_stderr_and_the_result_on_stdout(zae: Zae) -> None:
    populate(zae, entities=1)
    done = zae("namespace", "delete", zae.namespace, "--yes", "--wcu-per-second", "100000")
    assert done.code == 0, done.stderr
    assert done.stdout == f"deleted namespace {zae.namespace} (8 items)\n"
    assert "deleting" in done.stderr and "8/8" in done.stderr
