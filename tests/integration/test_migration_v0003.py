"""The step to schema 3 (full-at buckets) on real items (moto in-process), and the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from click.testing import CliRunner
from moto import mock_aws

from tests.old_layout import NOW_MS, create_table, scan_all
from zae_limiter import SchemaVersionError, SyncRepository, keys, migrations, schema
from zae_limiter.bucket import LimitState
from zae_limiter.cli import _errors, cli
from zae_limiter.flows import Call, Flow
from zae_limiter.flows.records.version import (
    check_record,
    check_version,
    read_version,
    write_version,
)
from zae_limiter.migrations import v0003_full_at_buckets as v0003
from zae_limiter.models import BucketState

BY = "test-suite"
MINUTE = 60_000


@dataclass(frozen=True)
class Legacy:
    """A schema-2 bucket item: per limit (capacity, refill amount, period, tk), as of rf."""

    ns: str
    entity: str
    shard: int
    count: int
    rf: int
    limits: dict[str, tuple[int, int, int, int]]

    @property
    def key(self) -> tuple[str, str]:
        k = keys.bucket_key(self.ns, self.entity, "gpt", self.shard)
        return k[keys.PK]["S"], k[keys.SK]["S"]

    def item(self) -> dict[str, Any]:
        states = {
            name: LimitState(capacity_milli=cp, refill_amount_milli=ra, refill_period_ms=rp)
            for name, (cp, ra, rp, _tk) in self.limits.items()
        }
        bucket = BucketState(self.entity, "gpt", self.shard, self.count, self.rf, states)
        item = keys.new_bucket_item(self.ns, bucket, self.rf)
        item[keys.A_REFILL] = keys.n(self.rf)
        for name, (_cp, _ra, _rp, tk) in self.limits.items():
            item[keys.limit_attr(name, "tk")] = keys.n(tk)
        return item

    def expected(self, name: str, now_ms: int) -> int:
        """What a v2 client read at `now_ms` (spelled out here, not taken from the code)."""
        cp, ra, rp, tk = self.limits[name]
        share = max(1, ra // self.count)
        gained = now_ms * share // rp - self.rf * share // rp
        return min(cp // self.count, tk + gained)


RPM = (10_000, 10_000, MINUTE)  # 10 per minute, in millitokens
TPM = (1_000_000, 1_000_000, MINUTE)
LEGACY = [
    # partly refilled: 2 tokens + 30 s at 10/min = 7
    Legacy("default", "a", 0, 1, NOW_MS - 30_000, {"rpm": (*RPM, 2000)}),
    # refilled past the top: clamped to 10
    Legacy("default", "b", 0, 1, NOW_MS - 10 * MINUTE, {"rpm": (*RPM, 9000)}),
    # in debt, two limits, a refill that does not divide evenly
    Legacy("default", "c", 0, 1, NOW_MS - 7_777, {"rpm": (*RPM, -3000), "tpm": (*TPM, 1)}),
    # shard 1 of 2: half the capacity and half the rate
    Legacy("default", "d", 1, 2, NOW_MS - 12_345, {"rpm": (*RPM, 1000)}),
    Legacy("tenant-b", "e", 0, 1, NOW_MS - 1, {"rpm": (*RPM, 0)}),
]


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def open_repo(name: str, client: Any) -> SyncRepository:
    return SyncRepository.open(name=name, client=client, clock=lambda: NOW_MS, check_schema=False)


def build_v2_table(ddb: Any, name: str, legacy: list[Legacy] = LEGACY) -> tuple[str, str]:
    """A table at schema 2 with `legacy` items and one already converted; its key."""
    create_table(ddb, name)
    with open_repo(name, ddb) as repo:
        repo.run(write_version(repo.state, 2, "0.1.0", NOW_MS - MINUTE, BY))
    for one in legacy:
        ddb.put_item(TableName=name, Item=one.item())
    state = LimitState(capacity_milli=RPM[0], refill_amount_milli=RPM[1], refill_period_ms=RPM[2],
                       full_at=NOW_MS * RPM[1] + 4000 * MINUTE)  # fmt: skip
    converted = BucketState("z", "gpt", 0, 1, 0, {"rpm": state})
    ddb.put_item(TableName=name, Item=keys.new_bucket_item("default", converted, NOW_MS))
    key = keys.bucket_key("default", "z", "gpt", 0)
    return key[keys.PK]["S"], key[keys.SK]["S"]


def run_migration(repo: SyncRepository, now_ms: int = NOW_MS) -> list[migrations.StepOutcome]:
    plan = repo.run(migrations.status(repo.state))
    return repo.run(migrations.migrate(repo.state, plan, now_ms, BY))


def assert_converted(table: dict[Any, dict[str, Any]], legacy: list[Legacy], now: int) -> None:
    for one in legacy:
        item = table[one.key]
        assert keys.A_REFILL not in item, one
        bucket = keys.decode_bucket(item)
        assert bucket.legacy_tokens == {}
        for name in one.limits:
            assert keys.limit_attr(name, "fa") in item
            # exact: the ceiling of the deficit lands on a whole millitoken here
            assert bucket.limits[name].tokens(now, one.count) == one.expected(name, now), one


def check_conversion(ddb: Any, name: str) -> None:
    """The guarantee: every legacy item converted, to the tokens a v2 client read."""
    untouched = build_v2_table(ddb, name)
    before = scan_all(ddb, name)
    with open_repo(name, ddb) as repo:
        outcomes = run_migration(repo)
        record = repo.run(check_version(repo.state, schema.MIN_CLIENT_VERSION))
    # Step 3 converts the legacy items; the steps after it (quotas: 4) change no bucket.
    assert (outcomes[0].version, outcomes[0].items) == (3, len(LEGACY))
    assert all(o.items == 0 for o in outcomes[1:])
    assert record is not None and (record.schema_version, record.min_client_version) == (
        schema.SCHEMA_VERSION,
        schema.MIN_CLIENT_VERSION,
    )
    after = scan_all(ddb, name)
    assert_converted(after, LEGACY, NOW_MS)
    assert after[untouched] == before[untouched]


def test_run_converts_every_legacy_item_to_the_tokens_it_held(ddb: Any, table_name: str) -> None:
    check_conversion(ddb, table_name)


def test_a_second_run_changes_nothing(ddb: Any, table_name: str) -> None:
    build_v2_table(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        run_migration(repo)
        after = scan_all(ddb, table_name)
        assert not repo.run(migrations.status(repo.state)).pending
        again = repo.run(v0003.up(repo.state, NOW_MS + MINUTE))
    assert again.skipped and again.items == 0
    assert scan_all(ddb, table_name) == after


def test_dry_run_counts_and_changes_nothing(ddb: Any, table_name: str) -> None:
    build_v2_table(ddb, table_name)
    before = scan_all(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        plan = repo.run(migrations.status(repo.state))
        assert (plan.current, plan.target) == (2, schema.SCHEMA_VERSION)
        counted = repo.run(migrations.plan_migration(repo.state, plan, NOW_MS))
    assert (counted[0].version, counted[0].items, counted[0].blocked) == (3, 5, None)
    assert all(c.items == 0 for c in counted[1:])
    assert counted[0].by_namespace == {"default": 4, "tenant-b": 1}
    assert scan_all(ddb, table_name) == before


class Crash(Exception):
    """The process died here."""


def crash_after(flow: Flow[Any], requests: int) -> Flow[Any]:
    send: Any = None
    for _ in range(requests):
        try:
            request = flow.send(send)
        except StopIteration as done:
            return done.value
        send = yield request
    flow.close()
    raise Crash


def test_interrupted_run_resumes_and_clients_keep_working_meanwhile(
    ddb: Any, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(v0003, "PAGE_SIZE", 2)
    build_v2_table(ddb, table_name)
    with open_repo(table_name, ddb) as repo:
        plan = repo.run(migrations.status(repo.state))
        # read, begin, then pages of (scan, updates, save progress); the crash
        with pytest.raises(Crash):
            repo.run(crash_after(migrations.migrate(repo.state, plan, NOW_MS, BY), 7))
        record = repo.run(read_version(repo.state))
        assert record is not None and record.migrating_to == 3
        assert record.migration_step == v0003.PHASE and record.cursor is not None
        assert 0 < record.done < len(LEGACY)
        repo.run(check_version(repo.state, "0.2.0"))  # 0.2.0 reads both forms: accepted
        with pytest.raises(SchemaVersionError, match="interrupted"):
            check_record(record, table_name, "0.1.0", supported=2)  # a release before 3
        halfway = scan_all(ddb, table_name)
        first = [one for one in LEGACY if keys.A_REFILL not in halfway[one.key]]
        # the crash came after a conversion whose progress was not saved yet
        assert record.done <= len(first) < len(LEGACY)

        later = NOW_MS + MINUTE
        outcomes = run_migration(repo, later)
    assert outcomes[0].items == len(LEGACY) - len(first)
    done = scan_all(ddb, table_name)
    assert_converted(done, first, NOW_MS)
    assert_converted(done, [one for one in LEGACY if one not in first], later)


def test_a_client_write_in_between_is_kept(ddb: Any, table_name: str) -> None:
    """A v2 client writes an item after the step read it: the step's write fails, it
    reads the item again and converts what the client left."""
    build_v2_table(ddb, table_name, LEGACY[:1])
    moved = Legacy("default", "a", 0, 1, NOW_MS - 1_000, {"rpm": (*RPM, 500)})

    def interfering(flow: Flow[Any]) -> Flow[Any]:
        send: Any = None
        raced = False
        while True:
            try:
                request = flow.send(send)
            except StopIteration as done:
                return done.value
            converting = isinstance(request, Call) and request.op == "update_item"
            names = request.params.get("ExpressionAttributeNames", {}) if converting else {}
            if converting and not raced and keys.A_REFILL in names.values():
                ddb.put_item(TableName=table_name, Item=moved.item())
                raced = True
            send = yield request

    with open_repo(table_name, ddb) as repo:
        plan = repo.run(migrations.status(repo.state))
        outcomes = repo.run(interfering(migrations.migrate(repo.state, plan, NOW_MS, BY)))
    assert outcomes[0].items == 1
    assert_converted(scan_all(ddb, table_name), [moved], NOW_MS)


def test_cli_migrate_converts_the_table(ddb: Any, table_name: str) -> None:
    build_v2_table(ddb, table_name)

    def cli_run(*args: str) -> tuple[int, str]:
        with CliRunner().isolation() as (out, _err, _):
            code = _errors.run(cli, ["migrate", "--name", table_name, *args])
            return code, out.getvalue().decode()

    code, out = cli_run("--check")
    assert code == 2 and "step 2 -> 3: full-at buckets" in out
    code, out = cli_run("--dry-run")
    assert code == 0 and "to full-at times: 5 (default: 4, tenant-b: 1)" in out
    assert all(keys.A_REFILL in scan_all(ddb, table_name)[one.key] for one in LEGACY)
    code, out = cli_run("--yes")
    assert code == 0 and "step 3 done (up): 5 items changed" in out
    assert cli_run("--check")[0] == 0
    table = scan_all(ddb, table_name)
    assert all(keys.A_REFILL not in table[one.key] for one in LEGACY)
    record = table[("_/SYSTEM#", "#VERSION")]
    assert record[keys.A_SCHEMA_VERSION] == {"N": str(schema.SCHEMA_VERSION)}
    assert record[keys.A_MIN_CLIENT_VERSION] == {"S": schema.MIN_CLIENT_VERSION}


# ---------------------------------------------------------------- the check's mutant
def test_a_conversion_that_ignores_the_elapsed_refill_is_caught(
    ddb: Any, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversion check fails on a step that keeps `tk` as it was at `rf`."""

    def no_refill(state: LimitState, tk: int, rf: int, now: int, count: int, held: int) -> int:
        return min(state.room(count, held), tk)

    monkeypatch.setattr(v0003, "legacy_tokens", no_refill)
    with pytest.raises(AssertionError, match="tokens"):
        check_conversion(ddb, table_name)
