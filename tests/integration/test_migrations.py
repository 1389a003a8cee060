"""Schema versions and the migration to pre-shard buckets, on real items (moto in-process)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from tests.old_layout import NOW_MS, OldTable, build_old_table, create_table, scan_all
from zae_limiter import Repository, SchemaVersionError, SyncRepository, keys, migrations
from zae_limiter.flows import Flow
from zae_limiter.flows.records.version import (
    check_version,
    client_version,
    read_version,
    write_version,
)
from zae_limiter.migrations import v0002_pre_shard_buckets as v0002
from zae_limiter.schema import SCHEMA_VERSION

DAY_S = 86_400
BY = "test-suite"


def open_repo(name: str, client: Any, **options: Any) -> SyncRepository:
    """Open without the schema check: the table may be old."""
    return SyncRepository.open(
        name=name, client=client, clock=lambda: NOW_MS, check_schema=False, **options
    )


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def old(ddb: Any, table_name: str) -> OldTable:
    return build_old_table(ddb, table_name)


def run_migration(repo: SyncRepository, now_ms: int = NOW_MS) -> list[migrations.StepOutcome]:
    plan = repo.run(migrations.status(repo.state))
    return repo.run(migrations.migrate(repo.state, plan, now_ms, BY))


def recorded(flow: Flow[Any], calls: list[Any]) -> Flow[Any]:
    """Pass a flow through, noting every request it makes."""
    send: Any = None
    while True:
        try:
            request = flow.throw(send) if isinstance(send, BaseException) else flow.send(send)
        except StopIteration as done:
            return done.value
        calls.append(request)
        try:
            send = yield request
        except BaseException as error:  # handed on to the inner flow
            send = error


class Crash(Exception):
    """The process died here."""


def _crashing(flow: Flow[Any], requests: int) -> Flow[Any]:
    send: Any = None
    for _ in range(requests):
        try:
            request = flow.throw(send) if isinstance(send, BaseException) else flow.send(send)
        except StopIteration as done:
            return done.value
        send = yield request
    flow.close()
    raise Crash


def drive_then_crash(repo: SyncRepository, flow: Flow[Any], requests: int) -> None:
    """Run the first `requests` round trips of a flow for real, then abandon it (a crash)."""
    with pytest.raises(Crash):
        repo.run(_crashing(flow, requests))


# ---------------------------------------------------------------- version record and checks
def test_fresh_table_has_no_record_is_accepted_and_migrate_stamps_it(
    ddb: Any, table_name: str
) -> None:
    create_table(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        assert repo.run(read_version(repo.state)) is None
        assert repo.run(check_version(repo.state)) is None  # a fresh table is accepted
        plan = repo.run(migrations.status(repo.state))
        assert (plan.current, plan.target, plan.pending) == (1, 6, True)
        outcomes = repo.run(migrations.migrate(repo.state, plan, NOW_MS, BY))
        steps = [(o.version, o.items, o.skipped) for o in outcomes]
        assert steps == [(2, 0, False), (3, 0, False), (4, 0, False), (5, 0, False), (6, 0, False)]
        record = repo.run(check_version(repo.state))
    assert record is not None
    assert (record.schema_version, record.min_client_version) == (6, "0.3.0")
    assert (record.updated_at_ms, record.updated_by) == (NOW_MS, BY)
    assert not record.migrating and record.cursor is None
    assert list(scan_all(ddb, table_name)) == [("_/SYSTEM#", "#VERSION")]


def test_table_at_an_older_schema_is_refused_with_the_command_to_run(
    ddb: Any, old: OldTable
) -> None:
    with open_repo(old.name, ddb) as repo, pytest.raises(SchemaVersionError) as caught:
        repo.run(check_version(repo.state, "0.2.0"))
    message = str(caught.value)
    assert "schema version 1" in message and "needs schema version 2" in message
    assert f"`zae-limiter migrate --name {old.name}`" in message


def test_table_at_a_newer_schema_is_refused(ddb: Any, table_name: str) -> None:
    create_table(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        repo.run(write_version(repo.state, 7, "0.5.0", NOW_MS, BY))
        with pytest.raises(SchemaVersionError) as caught:
            repo.run(check_version(repo.state, "0.3.0"))
        assert "schema version 7" in str(caught.value)
        assert "up to 6" in str(caught.value) and "0.3.0" in str(caught.value)
        with pytest.raises(SchemaVersionError, match="newer than 6"):
            repo.run(migrations.status(repo.state))


def test_client_older_than_the_minimum_is_refused(ddb: Any, table_name: str) -> None:
    create_table(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        repo.run(write_version(repo.state, 2, "0.10.0", NOW_MS, BY))
        with pytest.raises(SchemaVersionError) as caught:
            repo.run(check_version(repo.state, "0.9.12"))
        assert "0.9.12" in str(caught.value) and "0.10.0" in str(caught.value)
        record = repo.run(check_version(repo.state, "0.10.0"))  # numeric, not string order
        assert record is not None and record.min_client_version == "0.10.0"
        repo.run(check_version(repo.state, "1.0.0rc1"))


def test_check_version_uses_the_installed_release_by_default(ddb: Any, table_name: str) -> None:
    create_table(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        repo.run(write_version(repo.state, 2, client_version(), NOW_MS, BY))
        assert repo.run(check_version(repo.state)) is not None
        repo.run(write_version(repo.state, 2, "999.0", NOW_MS, BY))
        with pytest.raises(SchemaVersionError, match=client_version()):
            repo.run(check_version(repo.state))


# ---------------------------------------------------------------- the step to schema 2
def test_old_layout_is_migrated_and_everything_else_is_kept(ddb: Any, old: OldTable) -> None:
    before = scan_all(ddb, old.name)
    with open_repo(old.name, ddb) as repo:
        outcomes = run_migration(repo)
        record = repo.run(check_version(repo.state, "0.3.0"))
    assert [(o.version, o.items) for o in outcomes] == [(2, 5), (3, 0), (4, 0), (5, 0), (6, 0)]
    assert record is not None and record.schema_version == 6 and not record.migrating
    after = scan_all(ddb, old.name)
    assert set(after) == set(before)
    for item_key in old.kept:
        if item_key != ("_/SYSTEM#", "#VERSION"):
            assert after[item_key] == before[item_key], item_key
    for item_key in old.old_buckets:  # untouched but for a TTL a day from now
        expect = {**before[item_key], keys.TTL: {"N": str(NOW_MS // 1000 + DAY_S)}}
        assert after[item_key] == expect
    assert {pk.split("/")[0] for pk, _ in old.old_buckets} == {"default", "tenant-b"}


def test_migrated_table_is_usable_and_ignores_old_buckets(ddb: Any, old: OldTable) -> None:
    from zae_limiter import SyncRateLimiter

    with open_repo(old.name, ddb) as repo:
        run_migration(repo)
    with open_repo(old.name, ddb) as repo:
        limiter = SyncRateLimiter(repo)
        # the old bucket said 7 of 10 tokens left; schema 2 starts full from the config
        assert limiter.available("user-1", "gpt-4") == {"rpm": 10}
        with limiter.acquire("user-1", "gpt-4", {"rpm": 1}):
            pass
        assert limiter.available("user-1", "gpt-4") == {"rpm": 9}
    old_bucket = scan_all(ddb, old.name)[("default/ENTITY#user-1", "#BUCKET#gpt-4")]
    assert old_bucket["b_rpm_tk"] == {"N": "7000"}


def test_dry_run_counts_and_changes_nothing(ddb: Any, old: OldTable) -> None:
    before = scan_all(ddb, old.name)
    with open_repo(old.name, ddb) as repo:
        plan = repo.run(migrations.status(repo.state))
        counted = repo.run(migrations.plan_migration(repo.state, plan, NOW_MS))
    steps = [(c.version, c.items, c.blocked) for c in counted]
    assert steps == [(2, 5, None), (3, 0, None), (4, 0, None), (5, 0, None), (6, 0, None)]
    assert (
        counted[0].by_namespace
        == old.old_buckets_by_namespace()
        == {
            "default": 4,
            "tenant-b": 1,
        }
    )
    assert scan_all(ddb, old.name) == before


def test_second_run_changes_nothing(ddb: Any, old: OldTable) -> None:
    with open_repo(old.name, ddb) as repo:
        run_migration(repo)
        before = scan_all(ddb, old.name)
        plan = repo.run(migrations.status(repo.state))
        assert not plan.pending and plan.steps == ()
        assert repo.run(migrations.migrate(repo.state, plan, NOW_MS + 60_000, BY)) == []
        # the step itself, run again by hand, sees the version and does nothing either
        again = repo.run(v0002.up(repo.state, NOW_MS + 120_000))
        assert again.skipped and again.items == 0
    assert scan_all(ddb, old.name) == before


def test_a_step_of_an_earlier_run_that_lands_late_never_puts_the_version_back(
    ddb: Any, old: OldTable
) -> None:
    """A run that planned 2 -> 3 and whose writes arrive after another run finished
    (held in flight, a process paused, botocore's own retry): its version write is
    conditioned on 2 and changes nothing; the table stays at the latest version, with
    its minimum client version (found by the simulator, docs/simulator.md)."""
    with open_repo(old.name, ddb) as repo:
        late = repo.run(migrations.status(repo.state))  # planned at schema 1 ...
        run_migration(repo)  # ... while another run takes the table to the latest
        stale = dataclasses.replace(late, steps=late.steps[1:2], current=2, target=3)
        assert [step.version for step in stale.steps] == [3]
        repo.run(migrations.migrate(repo.state, stale, NOW_MS + 60_000, BY))
        record = repo.run(read_version(repo.state))
    assert record is not None and record.schema_version == SCHEMA_VERSION
    assert record.min_client_version == migrations.STEPS[-1].min_client_version


def test_interrupted_migration_resumes_where_it_stopped(
    ddb: Any, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(v0002, "PAGE_SIZE", 7)
    old = build_old_table(ddb, table_name, extra_buckets=40)
    total = len(old.old_buckets)
    with open_repo(table_name, ddb) as repo:
        plan = repo.run(migrations.status(repo.state))
        # describe, read, begin, then 3 pages of (scan, updates..., save progress)
        drive_then_crash(repo, migrations.migrate(repo.state, plan, NOW_MS, BY), 20)
        record = repo.run(read_version(repo.state))
        assert record is not None and record.schema_version == 1
        assert record.migrating_to == 2 and record.migration_step == v0002.PHASE
        assert record.cursor is not None and 0 < record.done < total
        with pytest.raises(SchemaVersionError, match="interrupted"):
            repo.run(check_version(repo.state, "0.2.0"))
        halfway = scan_all(ddb, table_name)
        expired = {k for k in old.old_buckets if keys.TTL in halfway[k]}
        assert record.done <= len(expired) < total

        later = NOW_MS + 3_600_000
        calls: list[Any] = []
        plan = repo.run(migrations.status(repo.state))
        outcomes = repo.run(recorded(migrations.migrate(repo.state, plan, later, BY), calls))
        record = repo.run(check_version(repo.state, "0.3.0"))
    scans = [c for c in calls if not isinstance(c, tuple) and c.op == "scan"]
    assert scans[0].params.get("ExclusiveStartKey") == halfway_cursor(halfway)
    assert outcomes[0].items == total - len(expired)
    assert record is not None and record.schema_version == 6 and not record.migrating
    done = scan_all(ddb, table_name)
    for item_key in old.old_buckets:
        first_run = item_key in expired
        when = NOW_MS if first_run else later
        assert done[item_key][keys.TTL] == {"N": str(when // 1000 + DAY_S)}, item_key


# ---------------------------------------------------------------- the step to schema 3
def test_a_migrated_schema_2_bucket_admits_only_what_it_held(ddb: Any, table_name: str) -> None:
    """A schema-2 bucket that an old client had drawn down to 3 of 10 tokens, converted
    by `migrate` (not by a client's write): the limiter then admits exactly those 3 and
    refuses the fourth. A conversion that wrote the bucket as full gave the 7 spent
    tokens back (the fault simulator's `migration-converts-as-full`)."""
    from tests.integration.test_migration_v0003 import MINUTE, Legacy
    from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter

    create_table(ddb, table_name)
    drawn = Legacy("default", "u", 0, 1, NOW_MS, {"rpm": (10_000, 10_000, MINUTE, 3000)})
    with open_repo(table_name, ddb) as repo:
        repo.run(write_version(repo.state, 2, "0.1.0", NOW_MS - MINUTE, BY))
        ddb.put_item(TableName=table_name, Item=drawn.item())
        outcomes = run_migration(repo)
        assert (outcomes[0].version, outcomes[0].items) == (3, 1)
        limits = [Limit.per_minute("rpm", 10)]
        limiter = SyncRateLimiter(repo)
        assert limiter.available("u", "gpt", limits=limits) == {"rpm": 3}
        for _ in range(3):
            with limiter.acquire("u", "gpt", {"rpm": 1}, limits=limits):
                pass
        with pytest.raises(RateLimitExceeded):
            with limiter.acquire("u", "gpt", {"rpm": 1}, limits=limits):
                pass


def test_a_count_raise_on_a_schema_2_bucket_creates_no_tokens(
    ddb: Any, table_name: str
) -> None:
    """A doubling of an entity whose shard 0 is still a schema-2 item (no client wrote it
    since, no `migrate` yet) is refused until a take converts the item: raised on the
    item as it is, its `tk` (3 of 10, the whole bucket's) became shard 0's share and the
    new shard got its 5 besides, 8 where 3 were (the fault simulator's seed 2917). After
    the take that converts it, the count rises and the 2 left are split, not multiplied."""
    from tests.integration.test_migration_v0003 import MINUTE, Legacy
    from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter
    from zae_limiter.flows.scaling.doubling import double

    create_table(ddb, table_name)
    drawn = Legacy("default", "u", 0, 1, NOW_MS, {"rpm": (10_000, 10_000, MINUTE, 3000)})
    limits = [Limit.per_minute("rpm", 10)]
    with open_repo(table_name, ddb) as repo:
        repo.run(write_version(repo.state, 2, "0.1.0", NOW_MS - MINUTE, BY))
        ddb.put_item(TableName=table_name, Item=drawn.item())
        limiter = SyncRateLimiter(repo)

        repo.run(double(repo.state, "u", "gpt", NOW_MS, NOW_MS - 1, True, ["rpm"]))
        shard0 = scan_all(ddb, table_name)[drawn.key]
        assert keys.get_n(shard0, keys.A_SHARD_COUNT, 1) == 1, "refused: not converted yet"
        assert limiter.available("u", "gpt", limits=limits) == {"rpm": 3}
        with limiter.acquire("u", "gpt", {"rpm": 1}, limits=limits):
            pass  # converts shard 0
        assert keys.A_REFILL not in scan_all(ddb, table_name)[drawn.key]
    with open_repo(table_name, ddb) as repo:  # a client that has not tried this window
        repo.run(double(repo.state, "u", "gpt", NOW_MS, NOW_MS - 1, True, ["rpm"]))
        shard0 = scan_all(ddb, table_name)[drawn.key]
        assert keys.get_n(shard0, keys.A_SHARD_COUNT, 1) == 2
        limiter = SyncRateLimiter(repo)
        admitted = 0
        for _ in range(5):
            try:
                with limiter.acquire("u", "gpt", {"rpm": 1}, limits=limits):
                    admitted += 1
            except RateLimitExceeded:
                pass
    assert admitted == 2


def halfway_cursor(items: dict[tuple[str, str], dict[str, Any]]) -> Any:
    import json

    record = items[("_/SYSTEM#", "#VERSION")]
    return json.loads(record[keys.A_MIGRATION_CURSOR]["S"])


def test_a_table_without_the_new_indexes_is_refused(ddb: Any, table_name: str) -> None:
    build_old_table(ddb, table_name, indexes=("GSI1", "GSI2"))
    before = scan_all(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        plan = repo.run(migrations.status(repo.state))
        counted = repo.run(migrations.plan_migration(repo.state, plan, NOW_MS))
        assert counted[0].blocked is not None and "GSI3, GSI4" in counted[0].blocked
        with pytest.raises(SchemaVersionError, match="zae-limiter deploy --name"):
            repo.run(migrations.migrate(repo.state, plan, NOW_MS, BY))
    assert scan_all(ddb, table_name) == before


def test_going_down_past_an_irreversible_step_is_refused(ddb: Any, old: OldTable) -> None:
    with open_repo(old.name, ddb) as repo:
        run_migration(repo)
        with pytest.raises(SchemaVersionError, match="cannot be undone"):
            repo.run(migrations.status(repo.state, 1))


def test_failed_write_is_thrown_into_the_flow_and_rerun_finishes(ddb: Any, old: OldTable) -> None:
    """A DynamoDB error mid-step surfaces as the library's error; a rerun completes."""
    from zae_limiter import RateLimiterUnavailable

    with open_repo(old.name, ddb) as repo:
        updates = 0
        failing = True

        def flaky(params: dict[str, Any], **_: Any) -> Any:
            # botocore's own hook on the real client: the third TTL write is throttled.
            nonlocal updates
            if failing and b"#ttl" in (params.get("body") or b""):
                updates += 1
                if updates == 3:
                    error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
                    return AWSResponse("http://x", 400, {}, None), error
            return None

        repo._runner.client.meta.events.register("before-call.dynamodb.UpdateItem", flaky)
        with pytest.raises(RateLimiterUnavailable):
            run_migration(repo)
        failing = False
        assert run_migration(repo)[0].version == 2
        record = repo.run(check_version(repo.state, "0.3.0"))
    assert record is not None and record.schema_version == 6
    after = scan_all(ddb, old.name)
    assert all(keys.TTL in after[k] for k in old.old_buckets)


# ---------------------------------------------------------------- the same flows, async
async def test_async_repository_runs_the_same_migration(moto_http: str, table_name: str) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=moto_http)
    old = build_old_table(client, table_name)
    repo = await Repository.open(name=table_name, endpoint_url=moto_http, check_schema=False)
    try:
        with pytest.raises(SchemaVersionError):
            await repo.run(check_version(repo.state, "0.2.0"))
        plan = await repo.run(migrations.status(repo.state))
        outcomes = await repo.run(migrations.migrate(repo.state, plan, NOW_MS, BY))
        assert [(o.version, o.items) for o in outcomes] == [(2, 5), (3, 0), (4, 0), (5, 0), (6, 0)]
        record = await repo.run(check_version(repo.state, "0.3.0"))
        assert record is not None and record.schema_version == 6
    finally:
        await repo.close()
    after = scan_all(client, table_name)
    assert all(keys.TTL in after[k] for k in old.old_buckets)


def test_a_table_created_by_open_is_stamped_with_the_current_schema(ddb: Any) -> None:
    with SyncRepository.open(name="fresh-open", client=ddb, create_table=True) as repo:
        record = repo.run(read_version(repo.state))
        assert repo.schema is not None and repo.schema.schema_version == SCHEMA_VERSION
    assert record is not None and record.schema_version == SCHEMA_VERSION
    assert record.updated_by == "Repository.open(create_table=True)"
