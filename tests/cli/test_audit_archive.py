"""Expired audit events: TTL REMOVE on the stream -> the aggregator -> S3 -> `audit list
--archived`, end to end on moto (DynamoDB, S3). The TTL deletion is made as DynamoDB's TTL
process makes it: the item is deleted, and the stream record names the service."""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Any

import boto3

from zae_limiter import keys
from zae_limiter.aggregator.archive import S3Archive
from zae_limiter.aggregator.handler import batch_response, process_batch, sync_runner
from zae_limiter.aggregator.plan import AggregatorConfig

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

NOW_MS = 1_900_000_000_000
TTL_PROCESS = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def expire(zae: Zae, entity_id: str, seq: int, who: dict[str, str] | None = TTL_PROCESS) -> Any:
    """Delete the entity's oldest audit event; the stream record that deletion makes."""
    client = boto3.client("dynamodb")
    query = keys.audit_query_entity(zae.table, zae.namespace, entity_id, 0)
    (item, *_) = client.query(**query)["Items"]
    key = {keys.PK: item[keys.PK], keys.SK: item[keys.SK]}
    old = client.delete_item(TableName=zae.table, Key=key, ReturnValues="ALL_OLD")["Attributes"]
    record: dict[str, Any] = {
        "eventID": uuid.uuid4().hex,
        "eventName": "REMOVE",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "Keys": key,
            "OldImage": old,
            "SequenceNumber": str(seq),
            "SizeBytes": 100,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }
    if who is not None:
        record["userIdentity"] = who
    return record


def new_bucket() -> str:
    name = f"archive-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def run_batch(zae: Zae, records: list[Any], bucket: str) -> dict[str, Any]:
    config = AggregatorConfig(table=zae.table)
    archive = S3Archive(boto3.client("s3"), bucket)
    failed = process_batch(records, config, sync_runner(zae.table).run, NOW_MS, archive)
    return batch_response(failed)


def archived(zae: Zae, bucket: str, *args: str) -> list[dict[str, Any]]:
    done = zae("audit", "list", "--archived", "--archive-bucket", bucket, "-o", "json", *args)
    assert done.code == 0, done.stderr
    return list(done.json()["events"])


def test_an_expired_event_lands_in_the_archive_and_is_listed(zae: Zae) -> None:
    assert zae("entity", "create", "acme", "--principal", "alice").code == 0
    live = zae("audit", "list", "-e", "acme", "-o", "json").json()["events"]
    bucket = new_bucket()
    record = expire(zae, "acme", seq=100)
    assert run_batch(zae, [record], bucket) == {"batchItemFailures": []}

    assert archived(zae, bucket, "-e", "acme") == live
    assert archived(zae, bucket, "--since", "2000-01-01") == live
    assert zae("audit", "list", "-e", "acme", "-o", "json").json()["events"] == []
    (obj,) = boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]
    assert obj["Key"].startswith(f"audit/namespace={zae.namespace}/date=")
    assert obj["Key"].endswith(".jsonl.gz")
    human = zae("audit", "list", "--archived", "--archive-bucket", bucket)
    assert "alice" in human.stdout and "create_entity" in human.stdout


def test_a_failed_s3_write_reports_the_item_and_a_rerun_archives_it_once(zae: Zae) -> None:
    zae("entity", "create", "acme")
    zae("entity", "create", "beta")
    records = [expire(zae, "acme", seq=200), expire(zae, "beta", seq=201)]
    bucket = f"archive-{uuid.uuid4().hex[:12]}"  # not created yet: S3 says NoSuchBucket

    assert run_batch(zae, records, bucket) == {
        "batchItemFailures": [{"itemIdentifier": "200"}, {"itemIdentifier": "201"}]
    }
    boto3.client("s3").create_bucket(Bucket=bucket)
    assert run_batch(zae, records, bucket) == {"batchItemFailures": []}
    assert run_batch(zae, records[1:], bucket) == {"batchItemFailures": []}  # a redelivery
    assert run_batch(zae, records, bucket) == {"batchItemFailures": []}
    found = archived(zae, bucket)
    assert sorted(e["entity_id"] for e in found) == ["acme", "beta"]
    assert len(boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]) == 2


def test_a_delete_by_a_user_is_not_an_expiry(zae: Zae) -> None:
    zae("entity", "create", "acme")
    bucket = new_bucket()
    by_user = {"type": "AssumedRole", "principalId": "AROA:someone"}
    records = [expire(zae, "acme", seq=300, who=by_user)]
    assert run_batch(zae, records, bucket) == {"batchItemFailures": []}
    assert "Contents" not in boto3.client("s3").list_objects_v2(Bucket=bucket)
    assert archived(zae, bucket) == []


def test_archived_without_a_stack_says_how_to_name_the_bucket(zae: Zae) -> None:
    done = zae("audit", "list", "--archived")
    assert done.code == 1 and "Traceback" not in done.stderr
    assert "does not exist" in done.stderr
    bad = zae("audit", "list", "--archive-bucket", "b")
    assert bad.code == 2 and "--archive-bucket goes with --archived" in bad.stderr


# ---------------------------------------------------------------- mutation checks
def _fresh(zae: Zae) -> Zae:
    """The same table, a namespace of its own: each guarantee body runs on clean ground."""
    from tests.cli.conftest import Zae as Fresh

    return Fresh(zae.table, f"ns{uuid.uuid4().hex[:10]}")


def _put_swallowing_errors(self: S3Archive, plan: Any) -> list[str]:
    # The broken variant: a failed write is dropped instead of reported.
    for obj in plan.objects:
        with contextlib.suppress(Exception):
            self.client.put_object(Bucket=self.bucket, Key=obj.key, Body=obj.body)
    return []


def _read_every_copy(self: S3Archive, namespace: str, **kw: Any) -> list[Any]:
    from zae_limiter.aggregator.archive import decode

    found = []
    for key in self._keys(namespace, 0):
        found += decode(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())
    return found


def _any_remove(record: Any) -> Any:
    body = record.get("dynamodb") or {}
    return body.get("OldImage") if record.get("eventName") == "REMOVE" else None


def test_the_archive_tests_catch_a_lost_write_a_double_listing_and_a_user_delete(
    zae: Zae,
) -> None:
    from tests.mutants import must_fail, mutant

    with mutant(S3Archive, "put", _put_swallowing_errors):
        must_fail(test_a_failed_s3_write_reports_the_item_and_a_rerun_archives_it_once,
                  _fresh(zae))  # fmt: skip
    with mutant(S3Archive, "read", _read_every_copy):
        must_fail(test_a_failed_s3_write_reports_the_item_and_a_rerun_archives_it_once,
                  _fresh(zae))  # fmt: skip
    with mutant(keys, "expired_audit_image", _any_remove):
        must_fail(test_a_delete_by_a_user_is_not_an_expiry, _fresh(zae))
