"""The migration registry, step selection and the version rules; no AWS."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

from zae_limiter import keys, migrations, schema
from zae_limiter.errors import SchemaVersionError
from zae_limiter.flows import Call, Flow, Result, run_pure
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.version import (
    VersionRecord,
    check_record,
    check_version,
    decode_version,
    parse_version,
    version_at_least,
)
from zae_limiter.migrations import BASE_VERSION, Migration, StepOutcome, StepPlan, select_steps
from zae_limiter.migrations import v0002_pre_shard_buckets as v0002


def _state() -> RepoState:
    from zae_limiter.config_cache import ConfigCache

    return RepoState(table="t", namespace="default", config_cache=ConfigCache(60))


def _noop_up(state: RepoState, now_ms: int) -> Flow[StepOutcome]:
    return StepOutcome(0, "up", 0)
    yield  # pragma: no cover


def _noop_plan(state: RepoState, now_ms: int) -> Flow[StepPlan]:
    return StepPlan(0, "nothing", 0)
    yield  # pragma: no cover


def fake(version: int, reversible: bool = True) -> Migration:
    return Migration(
        version, f"step {version}", reversible, "0.1.0", _noop_up, _noop_plan,
        _noop_up if reversible else None,
    )  # fmt: skip


# ---------------------------------------------------------------- the registry
def test_steps_are_contiguous_and_end_at_the_schema_version() -> None:
    versions = [s.version for s in migrations.STEPS]
    assert versions == list(range(BASE_VERSION + 1, BASE_VERSION + 1 + len(versions)))
    assert migrations.LATEST == schema.SCHEMA_VERSION == 6
    assert migrations.STEPS[-1].min_client_version == schema.MIN_CLIENT_VERSION


def test_every_step_module_is_registered_with_its_fields() -> None:
    modules = sorted(
        m.name for m in pkgutil.iter_modules(migrations.__path__) if m.name.startswith("v")
    )
    assert [m[:5] for m in modules] == [s.name for s in migrations.STEPS]
    for name, step in zip(modules, migrations.STEPS, strict=True):
        module: Any = importlib.import_module(f"zae_limiter.migrations.{name}")
        assert (module.version, module.description) == (step.version, step.description)
        assert module.reversible == step.reversible == (module.down is not None)
        assert step.up is module.up and step.plan is module.plan


def test_step_two_is_an_irreversible_clean_break() -> None:
    assert (v0002.version, v0002.reversible, v0002.down) == (2, False, None)
    assert v0002.TTL_SECONDS == 86_400


# ---------------------------------------------------------------- choosing the steps
STEPS = (fake(2), fake(3), fake(4, reversible=False), fake(5))


@pytest.mark.parametrize(
    ("current", "target", "direction", "versions"),
    [
        (1, 5, "up", [2, 3, 4, 5]),
        (2, 4, "up", [3, 4]),
        (5, 5, "none", []),
        (1, 1, "none", []),
        (3, 1, "down", [3, 2]),
        (5, 4, "down", [5]),
    ],
)
def test_select_steps(current: int, target: int, direction: str, versions: list[int]) -> None:
    chosen = select_steps(current, target, STEPS)
    assert chosen[0] == direction
    assert [s.version for s in chosen[1]] == versions


def test_select_steps_refuses_what_cannot_be_done() -> None:
    with pytest.raises(SchemaVersionError, match=r"step 4 .* cannot be undone"):
        select_steps(5, 3, STEPS)
    with pytest.raises(SchemaVersionError, match="newer than 5"):
        select_steps(6, 5, STEPS, "table 'x'")
    with pytest.raises(SchemaVersionError, match="unknown"):
        select_steps(1, 6, STEPS)
    with pytest.raises(SchemaVersionError, match="unknown"):
        select_steps(1, 0, STEPS)


# ---------------------------------------------------------------- version rules
@pytest.mark.parametrize(
    ("text", "parsed"),
    [("0.1.0", (0, 1)), ("0.10.2", (0, 10, 2)), ("1.2.0rc1", (1, 2)), ("v2", (2,)),
     ("1.0.0.dev3", (1,)), ("0.0.0", (0,))],
)  # fmt: skip
def test_parse_version(text: str, parsed: tuple[int, ...]) -> None:
    assert parse_version(text) == parsed


def test_versions_compare_numerically() -> None:
    assert version_at_least("0.10.0", "0.9.9")
    assert not version_at_least("0.9.12", "0.10.0")
    assert version_at_least("1.0", "1.0.0")
    with pytest.raises(ValueError):
        parse_version("latest")


def test_check_record_rules() -> None:
    check_record(None, "t", "0.1.0")  # no record: a fresh table
    check_record(VersionRecord(2, "0.1.0"), "t", "0.1.0")
    with pytest.raises(SchemaVersionError, match="`zae-limiter migrate --name t`"):
        check_record(VersionRecord(1), "t", "0.1.0")
    with pytest.raises(SchemaVersionError, match="interrupted"):
        check_record(VersionRecord(2, migrating_to=3), "t", "0.1.0", supported=2)
    with pytest.raises(SchemaVersionError, match=r"3, but zae-limiter 0\.1\.0 .* up to 2"):
        check_record(VersionRecord(3), "t", "0.1.0", supported=2)
    with pytest.raises(SchemaVersionError, match=r"0\.1\.0 is older than 0\.2\.0"):
        check_record(VersionRecord(2, "0.2.0"), "t", "0.1.0")


def test_this_release_reads_schema_two_to_six_and_a_table_between() -> None:
    for record in (
        VersionRecord(2, "0.1.0"),
        VersionRecord(3, "0.2.0"),
        VersionRecord(2, "0.1.0", migrating_to=3),
        VersionRecord(4, "0.3.0"),
        VersionRecord(3, "0.2.0", migrating_to=4),
        VersionRecord(5, "0.3.0"),
        VersionRecord(4, "0.3.0", migrating_to=5),
        VersionRecord(6, "0.3.0"),
        VersionRecord(5, "0.3.0", migrating_to=6),
    ):
        check_record(record, "t", "0.3.0")
    with pytest.raises(SchemaVersionError, match="schema version 2 or later"):
        check_record(VersionRecord(1, migrating_to=2), "t", "0.2.0")
    with pytest.raises(SchemaVersionError, match="interrupted"):
        check_record(VersionRecord(6, migrating_to=7), "t", "0.3.0")
    with pytest.raises(SchemaVersionError, match=r"older than 0\.2\.0"):
        check_record(VersionRecord(3, "0.2.0"), "t", "0.1.9")


def test_check_version_is_one_read() -> None:
    item = {
        **keys.version_key(),
        keys.A_SCHEMA_VERSION: keys.n(2),
        keys.A_MIN_CLIENT_VERSION: keys.s("0.1.0"),
    }
    flow = check_version(_state(), "0.1.0")
    first = next(flow)
    assert isinstance(first, Call) and first.op == "get_item"
    assert first.params["Key"] == keys.version_key() and first.params["ConsistentRead"]
    record = run_pure(check_version(_state(), "0.1.0"), [Result({"Item": item})])
    assert record == VersionRecord(2, "0.1.0")


def test_decode_version_reads_progress() -> None:
    item = {
        **keys.version_key(),
        keys.A_SCHEMA_VERSION: keys.n(1),
        keys.A_MIGRATING_TO: keys.n(2),
        keys.A_MIGRATION_STEP: keys.s(v0002.PHASE),
        keys.A_MIGRATION_CURSOR: keys.s('{"PK": {"S": "a"}, "SK": {"S": "b"}}'),
        keys.A_MIGRATION_DONE: keys.n(7),
        keys.A_UPDATED_AT: keys.n(5),
        keys.A_UPDATED_BY: keys.s("me"),
    }
    record = decode_version(item)
    assert record.migrating and record.migrating_to == 2 and record.done == 7
    assert record.cursor == {"PK": {"S": "a"}, "SK": {"S": "b"}}
    assert (record.updated_at_ms, record.updated_by) == (5, "me")


# ---------------------------------------------------------------- step 2, fed canned results
def test_step_two_does_nothing_on_a_table_already_at_two() -> None:
    indexes = {"GlobalSecondaryIndexes": [{"IndexName": f"GSI{i}"} for i in range(1, 5)]}
    record = {**keys.version_key(), keys.A_SCHEMA_VERSION: keys.n(2)}
    outcome = run_pure(
        v0002.up(_state(), 1_000),
        [Result({"Table": {"TableStatus": "ACTIVE", **indexes}}), Result({"Item": record})],
    )
    assert outcome == StepOutcome(2, "up", 0, skipped=True)


def test_old_bucket_expressions_only_touch_old_buckets() -> None:
    scan = keys.old_bucket_scan("t", 99, None, 10)
    assert scan["ExpressionAttributeValues"][":prefix"] == {"S": "#BUCKET#"}
    assert "ExclusiveStartKey" not in scan and scan["Limit"] == 10
    update = keys.expire_old_bucket("t", keys.key("default/ENTITY#a", "#BUCKET#r"), 99)
    assert "begins_with(#sk, :prefix)" in update["ConditionExpression"]
    assert "attribute_exists(#pk)" in update["ConditionExpression"]
    assert update["ExpressionAttributeNames"]["#ttl"] == keys.TTL
    assert keys.old_bucket_sk("gpt-4") == "#BUCKET#gpt-4"
    assert keys.namespace_of("tenant-b/ENTITY#x") == "tenant-b"


def test_migrate_runs_steps_in_order_and_bumps_after_each() -> None:
    def version_written(request: Any) -> tuple[int, str]:
        values = request.params["ExpressionAttributeValues"]
        return int(values[":v"]["N"]), values[":mcv"]["S"]

    steps = (fake(2), fake(3), fake(4))
    up = migrations.MigrationPlan("t", None, 1, 4, "up", steps)
    flow = migrations.migrate(_state(), up, 1_000, "me", steps)
    written = [version_written(next(flow))]
    written += [version_written(flow.send(Result({}))) for _ in range(2)]
    assert written == [(2, "0.1.0"), (3, "0.1.0"), (4, "0.1.0")]
    down = migrations.MigrationPlan("t", VersionRecord(3), 3, 1, "down", (steps[1], steps[0]))
    flow = migrations.migrate(_state(), down, 1_000, "me", steps)
    assert [version_written(next(flow)), version_written(flow.send(Result({})))] == [
        (2, "0.1.0"),
        (1, migrations.BASE_MIN_CLIENT_VERSION),
    ]


def test_step_three_writes_the_full_at_time_the_library_reads() -> None:
    """v0003 converts to the same full-at time as a 0.2.0 client's first write would,
    held reserves and shards included (flows.write.shares.current is the library's read)."""
    from zae_limiter.bucket import LimitState
    from zae_limiter.flows.write.shares import current
    from zae_limiter.limits import Limit
    from zae_limiter.migrations import v0003_full_at_buckets as v0003
    from zae_limiter.models import BucketState

    now = 1_800_000_000_000
    rpm = Limit.custom("rpm", 10, 10, 60)
    stored = LimitState(capacity_milli=10_000, refill_amount_milli=10_000, refill_period_ms=60_000)
    epoch = keys.reserve_epoch(now)
    for count, tk, held in [(1, 2000, 0), (2, -1500, 0), (1, 3000, 2000), (4, 9999, 0)]:
        bucket = BucketState(
            "e", "gpt", 1, count, now - 7_777, {"rpm": stored},
            reserved={"rpm": {epoch: held}} if held else {}, legacy_tokens={"rpm": tk},
        )  # fmt: skip
        item = keys.new_bucket_item("default", bucket, now)
        item[keys.A_REFILL] = keys.n(now - 7_777)
        item[keys.limit_attr("rpm", "tk")] = keys.n(tk)
        if held:
            item[keys.reserve_attr("rpm", epoch)] = keys.n(held)
        params = v0003.conversion("t", item, now)
        assert params is not None
        values = params["ExpressionAttributeValues"]
        library, _held, rebase = current(keys.decode_bucket(item), rpm, now)
        assert rebase and values[":full_at_0"] == keys.n(library.full_at or 0), (count, tk, held)
        assert values[":was_tokens_0"] == keys.n(tk)
        assert values[":was_refilled"] == keys.n(now - 7_777)
