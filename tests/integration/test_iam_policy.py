"""The IAM policies of `zae_limiter.infra.policy` hold what the library calls, and no more.

Each role's public operations run against in-process moto while every botocore client the
library creates records its calls (a `before-call` handler, which the lean path emits as
the regular client does). Each call becomes the IAM actions AWS checks for it, on the
resource it names; the test then requires, per role:

- every action on every resource a call needed is granted to the role that made it;
- every action granted for library calls was needed by one (a grant nothing uses fails).

The sync face runs here; the async face runs the same flows (one source, see
docs/maintainers.md), so it makes the same calls.

The translation from a call to IAM actions is written here, from AWS's rules, not taken
from the library: a transaction is authorised part by part (PutItem, UpdateItem,
DeleteItem, ConditionCheckItem), a Query or Scan with IndexName on that index, a stream
call on the stream, S3's ListObjectsV2 as s3:ListBucket, CloudFormation's DescribeStacks
on the stack, STS's GetCallerIdentity needs nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.session
import pytest
from moto import mock_aws

from tests.conftest import Clock
from tests.old_layout import build_old_table
from zae_limiter import (
    Limit,
    RateLimitExceeded,
    SyncRateLimiter,
    SyncRepository,
    keys,
    migrations,
    schema,
)
from zae_limiter.aggregator import handler as aggregator_handler
from zae_limiter.aggregator import shards as shards_module
from zae_limiter.aggregator.apply import execute
from zae_limiter.aggregator.archive import S3Archive
from zae_limiter.aggregator.merge import merge
from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate, StreamPlan
from zae_limiter.aggregator.poller import StreamPoller
from zae_limiter.bucket import LimitState
from zae_limiter.infra import Aws, StackNotFoundError, policy
from zae_limiter.infra.archive import archive_bucket
from zae_limiter.models import BucketState
from zae_limiter.top.reader import open_reader

LIMITS = [Limit.per_minute("rpm", 100)]
RPM = {"capacity_milli": 100_000, "refill_amount_milli": 100_000, "refill_period_ms": 60_000}
Needed = set[tuple[str, str]]  # (IAM action, resource kind)

_TRANSACT_PARTS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
_S3 = {
    "ListObjectsV2": ("s3:ListBucket", policy.ARCHIVE_BUCKET),
    "GetObject": ("s3:GetObject", policy.ARCHIVE_OBJECTS),
    "PutObject": ("s3:PutObject", policy.ARCHIVE_OBJECTS),
}


def iam_needs(service: str, operation: str, body: dict[str, Any]) -> Needed:
    """What IAM checks for one call (see the module's docstring)."""
    if service == "sts" and operation == "GetCallerIdentity":
        return set()
    if service == "dynamodb-streams":
        return {(f"dynamodb:{operation}", policy.STREAM)}
    if service == "s3":
        return {_S3[operation]}
    if service == "cloudformation" and operation == "DescribeStacks":
        return {("cloudformation:DescribeStacks", policy.STACK)}
    assert service == "dynamodb", f"a call to {service}:{operation} nobody expected"
    if operation == "TransactWriteItems":
        return {
            (_TRANSACT_PARTS[kind], policy.TABLE) for part in body["TransactItems"] for kind in part
        }
    if operation == "TransactGetItems":
        return {("dynamodb:GetItem", policy.TABLE)}
    where = policy.index(body["IndexName"]) if "IndexName" in body else policy.TABLE
    return {(f"dynamodb:{operation}", where)}


# eq=False: botocore keeps handlers in sets, so it must hash (by identity).
@dataclass(eq=False)
class Recorder:
    """Which role is acting now, and what each role's calls needed."""

    role: str | None = None
    needs: dict[str, Needed] = field(default_factory=lambda: defaultdict(set))
    operations: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def __call__(self, event_name: str, params: dict[str, Any] | None = None, **_: Any) -> None:
        if self.role is None:
            return  # arranging the test's own state
        _, service, operation = event_name.split(".")
        raw = (params or {}).get("body") or b""
        body = json.loads(raw) if service.startswith("dynamodb") and raw else {}
        self.operations[self.role].add(f"{service}:{operation}")
        self.needs[self.role] |= iam_needs(service, operation, body)

    @contextmanager
    def acting(self, role: str) -> Iterator[None]:
        self.role = role
        try:
            yield
        finally:
            self.role = None


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    """Every role's operations, run once with every botocore client made from here on (the
    library's, boto3's) reporting to the recorder; moto stays up for the tests."""
    recorder = Recorder()
    create = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = create(self, *args, **kwargs)
        client.meta.events.register("before-call", recorder)
        return client

    with pytest.MonkeyPatch.context() as patch, mock_aws():
        patch.setattr(botocore.session.Session, "create_client", create_client)
        # The handler keeps its clients while warm: one from another test is not ours.
        patch.setattr(aggregator_handler, "_runners", {})
        run_every_role(recorder, Clock(), patch)
        yield recorder


def client_role(rec: Recorder, clock: Clock) -> None:
    """What a service that rate-limits does: open, acquire, lease, reads of its buckets."""
    with rec.acting("client"):
        for reserves in (True, False):
            repo = SyncRepository.open(
                name="policy",
                clock=clock,
                partition_wcu=10,
                reserve=reserves,
            )
            limiter = SyncRateLimiter(repo)
            slow = SyncRateLimiter(repo, speculative_writes=False)
            for _ in range(3):
                with limiter.acquire("key", "api", {"rpm": 1}) as lease:  # cascades to proj
                    lease.adjust(rpm=1)
            with pytest.raises(ValueError), limiter.acquire("key", "api", {"rpm": 1}):
                raise ValueError("rolled back")
            with slow.acquire("key", "api", {"rpm": 1}):
                pass
            for _ in range(12):  # hot: the shard count doubles and shard 1 is created
                with limiter.acquire("hot", "api", {"rpm": 1}, limits=LIMITS):
                    pass
            with pytest.raises(RateLimitExceeded):
                with limiter.acquire("hot", "api", {"rpm": 99}, limits=LIMITS):
                    pass
            limiter.available("key", "api")
            limiter.time_until_available("key", "api", {"rpm": 5})
            repo.tend_reserves()
            repo.return_reserves()
            repo.close()
            clock.advance(120)


def operator_role(rec: Recorder) -> SyncRateLimiter:
    """Configuration and inspection by name; the entities `client_role` uses."""
    with rec.acting("operator"):
        ops = SyncRateLimiter(SyncRepository.open(name="policy"))
        ops.create_entity("proj")
        ops.create_entity("key", parent_id="proj", cascade=True)
        ops.create_entity("gone")
        ops.update_entity("gone", name="Gone")
        ops.set_system_defaults(LIMITS)
        ops.set_resource_defaults("api", LIMITS)
        ops.set_limits("key", LIMITS, resource="api")
        ops.set_limits("proj", LIMITS, resource="api")
        ops.set_limits("gone", LIMITS)
        ops.get_entity("key")
        ops.get_entities(["key", "proj"])
        ops.get_children("proj")
        ops.list_entities()
        ops.get_limits("key", "api")
        ops.get_resource_defaults("api")
        ops.get_system_defaults()
        ops.list_limit_levels()
        ops.resolve_limits("key", "api")
    return ops


def operator_inspects(rec: Recorder, ops: SyncRateLimiter) -> None:
    with rec.acting("operator"):
        ops.get_shards("hot", "api")
        ops.list_resources("key")
        ops.get_audit_events("key")
        ops.get_usage_snapshots(entity_id="key")
        ops.get_usage_summary(entity_id="key")
        ops.list_namespaces()
        ops.namespace_info()
        ops.delete_limits("gone")
        ops.delete_entity("gone")
        ops.delete_resource_defaults("api")
        ops.delete_system_defaults()
        scratch = SyncRateLimiter(SyncRepository.open("scratch", name="policy"))
        scratch.create_entity("temp")
        ops.delete_namespace("scratch")


def operator_migrates(rec: Recorder) -> None:
    """A schema-1 table taken to the current version, as `zae-limiter migrate` does."""
    client = boto3.client("dynamodb")
    build_old_table(client, "old-policy")
    with rec.acting("operator"):
        repo = SyncRepository.open(name="old-policy", check_schema=False)
        plan = repo.run(migrations.status(repo.state))
        repo.run(migrations.plan_migration(repo.state, plan, repo.now_ms()))
        outcomes = repo.run(migrations.migrate(repo.state, plan, repo.now_ms(), "policy-test"))
        repo.close()
    assert [o.version for o in outcomes] == list(range(2, schema.SCHEMA_VERSION + 1))


def aggregator_role(rec: Recorder, monkeypatch: pytest.MonkeyPatch, bucket: str) -> None:
    """The Lambda handler on the stream's records (read by the local poller), with an
    expired audit event for the archive, and a shard merge."""
    monkeypatch.setenv("ZAEL_NAME", "policy")
    monkeypatch.setenv("ZAEL_AUDIT_ARCHIVE_BUCKET", bucket)
    records: list[dict[str, Any]] = []
    with rec.acting("aggregator"):
        poller = StreamPoller.open(aggregator_handler.config_from_env())
        process = poller.handle

        def keep(batch: list[dict[str, Any]]) -> None:  # the records, for the handler
            records.extend(batch)
            process(batch)

        poller.handle = keep  # type: ignore[method-assign]
        poller.poll_once()
    records.append(expired_audit_event("key"))
    with rec.acting("aggregator"):
        assert aggregator_handler.handler({"Records": records}) == {"batchItemFailures": []}
        run = aggregator_handler.sync_runner("policy").run
        config = AggregatorConfig(table="policy", merge_quiet_ms=0)
        run(merge(config, MergeCandidate("default", "hot", "api", 2, "1"), 0))
    # A raise back over a shard a merge drained deletes it first (flows/scaling/made.py).
    table = boto3.client("dynamodb")
    for shard in (0, 1):  # shard 1 drained to one shard
        limits = {"rpm": LimitState(**RPM, full_at=10)}
        shard_state = BucketState("back", "api", shard, 1, 0, limits)
        table.put_item(TableName="policy", Item=keys.new_bucket_item("default", shard_state, 0))
    with rec.acting("aggregator"):
        raise_back = shards_module._double(("default", "back", "api"), 1, config, 1, 0, (), ["rpm"])
        assert run(execute(StreamPlan(writes=[raise_back]), config, 1)) == []
    assert records, "the poller read no stream records"


def expired_audit_event(entity_id: str) -> dict[str, Any]:
    """The stream record of an audit event the table's TTL deleted."""
    from zae_limiter import keys

    client = boto3.client("dynamodb")
    query = keys.audit_query_entity("policy", "default", entity_id, 0)
    item = client.query(**query)["Items"][0]
    key = {keys.PK: item[keys.PK], keys.SK: item[keys.SK]}
    return {
        "eventID": "expired-1",
        "eventName": "REMOVE",
        "eventSource": "aws:dynamodb",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {
            "Keys": key,
            "OldImage": item,
            "SequenceNumber": "999999999999",
            "SizeBytes": 100,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


def operator_reads_stream_and_archive(rec: Recorder, bucket: str) -> Callable[[], None]:
    with rec.acting("operator"):
        reader = open_reader("policy")
        reader.open(0)

    def read() -> None:
        with rec.acting("operator"):
            reader.poll(2**62)
            assert S3Archive(boto3.client("s3"), bucket).read("default")
            # Without --archive-bucket the bucket is looked up in the stack's outputs
            # (there is no stack here: the lookup is what counts).
            with pytest.raises(StackNotFoundError):
                archive_bucket(Aws("us-east-1"), "policy")

    return read


def run_every_role(rec: Recorder, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    SyncRepository.open(name="policy", create_table=True).close()  # the deploy's part
    bucket = "policy-auditarchivebucket-test"
    boto3.client("s3").create_bucket(Bucket=bucket)
    ops = operator_role(rec)
    read_stream_and_archive = operator_reads_stream_and_archive(rec, bucket)
    client_role(rec, clock)
    aggregator_role(rec, monkeypatch, bucket)
    read_stream_and_archive()
    operator_inspects(rec, ops)
    operator_migrates(rec)


Grants = Callable[[str], dict[str, frozenset[str]]]


def drift(needs: dict[str, Needed], grants: Grants) -> list[str]:
    """Every way the policies and the calls disagree, one line each."""
    problems = []
    for role in policy.ROLES:
        have = {(a, kind) for a, kinds in grants(role).items() for kind in kinds}
        for action, kind in sorted(needs.get(role, set()) - have):
            problems.append(f"{role} calls {action} on {kind}, which its policy lacks")
        for action, kind in sorted(have - needs.get(role, set())):
            problems.append(f"{role}'s policy grants {action} on {kind}, which it never calls")
    return problems


def library_grants(role: str) -> dict[str, frozenset[str]]:
    return policy.granted(role, by_aws=False)


def test_each_role_is_granted_exactly_what_its_operations_call(recorder: Recorder) -> None:
    needs = dict(recorder.needs)
    assert set(needs) == set(policy.ROLES)
    problems = drift(needs, library_grants)
    assert not problems, "\n".join(problems)


def test_the_drift_check_catches_a_missing_or_an_unused_grant(recorder: Recorder) -> None:
    """A mutant of the policy table: the check fails when a role's policy lacks an action
    the library calls (as when the library starts calling one), or grants one it never
    calls."""
    needs = {role: set(found) for role, found in recorder.needs.items()}

    def without_update_item(role: str) -> dict[str, frozenset[str]]:
        grants = library_grants(role)
        if role == "client":
            grants.pop("dynamodb:UpdateItem")
        return grants

    assert drift(needs, without_update_item) == [
        "client calls dynamodb:UpdateItem on table, which its policy lacks"
    ]

    def with_scan(role: str) -> dict[str, frozenset[str]]:
        grants = library_grants(role)
        if role == "client":
            grants["dynamodb:Scan"] = frozenset({policy.TABLE})
        return grants

    assert drift(needs, with_scan) == [
        "client's policy grants dynamodb:Scan on table, which it never calls"
    ]
    # The same check, when the library makes a call no policy has: a client that scans.
    try:
        with recorder.acting("client"):
            boto3.client("dynamodb").scan(TableName="policy", Limit=1)
        assert drift(dict(recorder.needs), library_grants) == [
            "client calls dynamodb:Scan on table, which its policy lacks"
        ]
    finally:  # the module's recording stays as the library made it
        recorder.needs["client"].discard(("dynamodb:Scan", policy.TABLE))
