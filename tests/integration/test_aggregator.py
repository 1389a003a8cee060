"""The aggregator end to end on in-process moto: acquires, `aggregator run --once`, usage.

moto supports DynamoDB Streams in-process, so the CLI's poller reads the real stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import Clock
from zae_limiter import Limit, SyncRateLimiter, SyncRepository, keys
from zae_limiter.aggregator import shards as shards_module
from zae_limiter.aggregator.apply import execute
from zae_limiter.aggregator.merge import merge
from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate, StreamPlan
from zae_limiter.bucket import LimitState
from zae_limiter.cli import cli
from zae_limiter.flows.scaling.doubling import double
from zae_limiter.models import BucketState

RPM = Limit.per_minute("rpm", 1_000)
TPM = Limit.per_minute("tpm", 1_000_000)


@pytest.fixture
def limiter(table_name: str, clock: Clock) -> Iterator[SyncRateLimiter]:
    from moto import mock_aws

    with mock_aws():
        repo = SyncRepository.open(name=table_name, create_table=True, clock=clock)
        yield SyncRateLimiter(repo)
        repo.close()


def run_aggregator(table_name: str, *extra: str) -> dict[str, Any]:
    import json

    result = CliRunner().invoke(
        cli, ["aggregator", "run", "--once", "--name", table_name, "-o", "json", *extra],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def usage(limiter: SyncRateLimiter, **filters: Any) -> list[Any]:
    return limiter.get_usage_snapshots(**filters)


def test_snapshots_count_exactly_what_was_consumed(
    limiter: SyncRateLimiter, table_name: str
) -> None:
    limiter.create_entity("org")
    limiter.create_entity("key-1", parent_id="org", cascade=True)
    for entity in ("org", "key-1"):
        limiter.set_limits(entity, [RPM, TPM], resource="gpt-4")
    expected = {"rpm": 0, "tpm": 0}
    for i in range(6):
        with limiter.acquire("key-1", "gpt-4", {"rpm": 1, "tpm": 100 + i}) as lease:
            lease.adjust(tpm=7)
        expected["rpm"] += 1
        expected["tpm"] += 107 + i
    with pytest.raises(RuntimeError), limiter.acquire("key-1", "gpt-4", {"rpm": 3, "tpm": 999}):
        raise RuntimeError("rolled back: consumes nothing")
    # Usage of acquires served from a token reserve is written when the reserve goes back.
    limiter.repository.return_reserves()
    stats = run_aggregator(table_name)
    assert stats["failed"] == 0 and stats["records"] > 0
    for entity in ("key-1", "org"):
        snaps = usage(limiter, entity_id=entity)
        assert {s.window for s in snaps} == {"hourly", "daily", "monthly"}
        for window in ("hourly", "daily", "monthly"):
            total: dict[str, int] = {}
            for snap in (s for s in snaps if s.window == window):
                for name, value in snap.counters.items():
                    total[name] = total.get(name, 0) + value
            assert total == expected, (entity, window)
            assert "wcu" not in total
    # Reading the whole stream again (no checkpoint) counts nothing twice.
    run_aggregator(table_name)
    summary = limiter.get_usage_summary(entity_id="key-1")
    assert summary.counters == expected
    by_resource = usage(limiter, resource="gpt-4", window="daily")
    assert sorted(s.entity_id for s in by_resource) == ["key-1", "org"]
    everything = usage(limiter)
    assert len(everything) == 6


def _shard_items(
    limiter: SyncRateLimiter, entity: str, resource: str, count: int
) -> dict[int, Any]:
    client = limiter.repository._runner.client
    out = {}
    for i in range(count):
        got = client.get_item(
            TableName=limiter.repository.table_name,
            Key=keys.bucket_key("default", entity, resource, i),
            ConsistentRead=True,
        )
        if "Item" in got:
            out[i] = got["Item"]
    return out


def _shard_item(shard: int, count: int, tokens: int, now: int) -> dict[str, Any]:
    """A shard of `hot`/`api` (rpm 600/min) holding `tokens` millitokens at `now`."""
    state = LimitState(
        capacity_milli=600_000,
        refill_amount_milli=600_000,
        refill_period_ms=60_000,
        total_consumed_milli=5,
    )
    state = replace(state, full_at=state.with_tokens(tokens, now, count))
    shard_state = BucketState("hot", "api", shard, count, 0, {"rpm": state})
    return keys.new_bucket_item("default", shard_state, now)


def _tokens(item: dict[str, Any], now: int) -> int:
    shard = keys.decode_bucket(item)
    return shard.limits["rpm"].tokens(now, shard.shard_count)


def test_merge_conserves_tokens_and_never_goes_below_one_shard(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    limit = Limit.per_minute("rpm", 600)
    limiter.set_limits("hot", [limit], resource="api")
    client = limiter.repository._runner.client
    now = clock.now_ms
    # Four shards of one entity, as doubling left them, each partly used.
    for shard, tokens in enumerate([100_000, 37_000, 150_000, 2_000]):
        item = _shard_item(shard, 4, tokens, now)
        if shard == 0:
            item[keys.A_QUIET_SINCE] = keys.n(now - 3_600_000)
            item[keys.A_SHARD_DOUBLED] = keys.n(now - 3_600_000)
        client.put_item(TableName=table_name, Item=item)
    config = AggregatorConfig(table=table_name, merge_quiet_ms=60_000)
    run = limiter.repository.run
    before = _shard_items(limiter, "hot", "api", 4)
    total_before = sum(_tokens(i, now) for i in before.values())
    assert total_before == 289_000
    assert run(merge(config, MergeCandidate("default", "hot", "api", 4, "1"), now))
    after = _shard_items(limiter, "hot", "api", 4)
    assert [keys.get_n(after[i], keys.A_SHARD_COUNT) for i in range(4)] == [2, 2, 2, 2]
    assert sum(_tokens(after[i], now) for i in range(2)) == total_before
    assert (_tokens(after[0], now), _tokens(after[1], now)) == (250_000, 39_000)
    # drained shards hold nothing until well after the merge
    assert all(_tokens(after[i], now + config.freeze_ms) == 0 for i in (2, 3))
    assert all(keys.get_n(i, "b_rpm_tc") == 5 for i in after.values())  # usage untouched
    # 2 -> 1 needs the quiet period again (sd was just set); then 1 is the floor.
    assert not run(merge(config, MergeCandidate("default", "hot", "api", 2, "2"), now))
    client.update_item(
        TableName=table_name, Key=keys.bucket_key("default", "hot", "api", 0),
        UpdateExpression="SET qs = :t, sd = :t",
        ExpressionAttributeValues={":t": keys.n(now - 3_600_000)},
    )  # fmt: skip
    assert run(merge(config, MergeCandidate("default", "hot", "api", 2, "3"), now))
    final = _shard_items(limiter, "hot", "api", 4)
    assert keys.get_n(final[0], keys.A_SHARD_COUNT) == 1
    assert _tokens(final[0], now) == total_before
    assert not run(merge(config, MergeCandidate("default", "hot", "api", 1, "4"), now))
    assert keys.get_n(_shard_items(limiter, "hot", "api", 1)[0], keys.A_SHARD_COUNT) == 1


def test_snapshots_stay_exact_while_shards_double_and_split(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """Doubling, split creation (a token move, not consumption) and retries on other
    shards must not show up as usage: the counters equal what was admitted."""
    from zae_limiter import RateLimitExceeded

    # Reserves off: every admitted acquire is a write, so the shards double.
    repo = SyncRepository.open(name=table_name, partition_wcu=10, clock=clock, reserve=False)
    hot = SyncRateLimiter(repo)
    limits = [Limit.per_minute("rpm", 600)]
    admitted = 0
    for _ in range(60):
        clock.advance(0.05)  # 20 writes a second: the shard count doubles, shards split
        try:
            with hot.acquire("hot", "api", {"rpm": 1}, limits=limits):
                admitted += 1
        except RateLimitExceeded:
            pass
    assert len(hot.get_shards("hot", "api")) >= 2
    run_aggregator(table_name)
    summary = hot.get_usage_summary(entity_id="hot", window="daily")
    assert summary.counters == {"rpm": admitted}


def test_no_merge_while_clients_hold_reserves_of_a_shard(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """Reserves make a hot entity write little: a held count says it is not quiet."""
    client = limiter.repository._runner.client
    now = clock.now_ms
    for shard in range(2):
        item = _shard_item(shard, 2, 100_000, now)
        if shard == 0:
            item[keys.A_QUIET_SINCE] = keys.n(now - 3_600_000)
            item[keys.A_SHARD_DOUBLED] = keys.n(now - 3_600_000)
        else:
            item[keys.reserve_attr("rpm", keys.reserve_epoch(now))] = keys.n(20_000)
        client.put_item(TableName=table_name, Item=item)
    config = AggregatorConfig(table=table_name, merge_quiet_ms=60_000)
    run = limiter.repository.run
    assert not run(merge(config, MergeCandidate("default", "hot", "api", 2, "1"), now))
    # Once the held count is an epoch too old (a crashed client's), the merge goes ahead.
    later = now + 2 * keys.RESERVE_EPOCH_MS
    assert run(merge(config, MergeCandidate("default", "hot", "api", 2, "2"), later))


def _with_snapshot(item: dict[str, Any], count: int, tokens: int, now: int) -> dict[str, Any]:
    """`item` with a split snapshot (`sf`) holding `tokens` at `now`: what the shards it
    stands for, not made yet, hold."""
    state = keys.decode_bucket(item).limits["rpm"]
    item[keys.limit_attr("rpm", "sf")] = keys.n(state.with_tokens(tokens, now, count))
    return item


def test_merge_counts_unmade_shards_at_their_donors_snapshot(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """The simulator's seed 455: a shard a doubling made room for and no acquire made yet
    is not full, it holds its donor's split snapshot. Merged as if full, 8 -> 4 shards
    created tokens; its donor's snapshot read at the halved count did too."""
    limit = Limit.per_minute("rpm", 600)
    limiter.set_limits("hot", [limit], resource="api")
    client = limiter.repository._runner.client
    now = clock.now_ms
    # 8 shards of 75 tokens; 0, 1, 2 and 4 made (own tokens, snapshot tokens). Unmade:
    # 3 and 5 stand in 1's snapshot, 6 in 2's, 7 (its donor 3 unmade) in 0's.
    made = {0: (40_000, 5_000), 1: (30_000, 70_000), 2: (20_000, 60_000), 4: (10_000, 10_000)}
    for shard, (tokens, snapshot) in made.items():
        item = _with_snapshot(_shard_item(shard, 8, tokens, now), 8, snapshot, now)
        if shard == 0:
            item[keys.A_QUIET_SINCE] = keys.n(now - 3_600_000)
            item[keys.A_SHARD_DOUBLED] = keys.n(now - 3_600_000)
        client.put_item(TableName=table_name, Item=item)
    before = limiter.available("hot", "api", limits=[limit])
    assert before == {"rpm": 40 + 30 + 20 + 10 + 70 + 70 + 60 + 5}
    config = AggregatorConfig(table=table_name, merge_quiet_ms=60_000)
    run = limiter.repository.run
    assert run(merge(config, MergeCandidate("default", "hot", "api", 8, "1"), now))
    after = _shard_items(limiter, "hot", "api", 8)
    assert sorted(after) == [0, 1, 2, 4]
    assert [_tokens(after[i], now) for i in (0, 1, 2)] == [50_000, 100_000, 80_000]
    # Unmade 3 absorbs unmade 7: both in shard 1's snapshot now, as 3's first acquire copies.
    snapshot = keys.decode_bucket(after[1]).split_full_at["rpm"]
    assert (
        replace(keys.decode_bucket(after[1]).limits["rpm"], full_at=snapshot).tokens(now, 4)
        == 70_000 + 5_000
    )
    assert limiter.available("hot", "api", limits=[limit]) == before


def test_merge_is_cancelled_when_an_unmade_shard_is_made_meanwhile(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """The plan counts an unmade shard at its donor's snapshot; the transaction checks it
    is still unmade, so an acquire that makes it in between cancels the merge."""
    limit = Limit.per_minute("rpm", 600)
    limiter.set_limits("hot", [limit], resource="api")
    client = limiter.repository._runner.client
    now = clock.now_ms
    item = _with_snapshot(_shard_item(0, 2, 100_000, now), 2, 20_000, now)
    item[keys.A_QUIET_SINCE] = keys.n(now - 3_600_000)
    item[keys.A_SHARD_DOUBLED] = keys.n(now - 3_600_000)
    client.put_item(TableName=table_name, Item=item)
    config = AggregatorConfig(table=table_name, merge_quiet_ms=60_000)
    cand = MergeCandidate("default", "hot", "api", 2, "1")

    def make_shard_1() -> None:
        client.put_item(TableName=table_name, Item=_shard_item(1, 2, 20_000, now))

    assert not limiter.repository.run(_after_first_call(merge(config, cand, now), make_shard_1))
    after = _shard_items(limiter, "hot", "api", 2)
    assert [keys.get_n(after[i], keys.A_SHARD_COUNT) for i in (0, 1)] == [2, 2]
    assert _tokens(after[0], now) == 100_000


def _after_first_call(flow: Any, meanwhile: Any) -> Any:
    """`flow`, with `meanwhile()` run once its first call is answered."""
    result = yield next(flow)
    meanwhile()
    while True:
        try:
            call = flow.send(result)
        except StopIteration as stop:
            return stop.value
        result = yield call


def test_a_global_limits_use_is_counted_from_its_share_item(
    limiter: SyncRateLimiter, table_name: str
) -> None:
    """docs/global.md, "Usage snapshots": the acquires, adjustments and rollbacks taken
    from this region's share of a global limit, as the aggregator adds them up."""
    gps = Limit.per_second("gps", 100).across("us-east-1", "eu-west-1")
    limiter.set_limits("tenant", [RPM, gps], resource="gpt-4")
    for _ in range(4):
        with limiter.acquire("tenant", "gpt-4", {"rpm": 1, "gps": 2}) as lease:
            lease.adjust(gps=1)
    with pytest.raises(RuntimeError), limiter.acquire("tenant", "gpt-4", {"gps": 5}):
        raise RuntimeError("rolled back: consumes nothing")
    limiter.repository.return_reserves()
    assert run_aggregator(table_name)["failed"] == 0
    hourly = [s for s in usage(limiter, entity_id="tenant") if s.window == "hourly"]
    total: dict[str, int] = {}
    for snap in hourly:
        for name, value in snap.counters.items():
            total[name] = total.get(name, 0) + value
    assert total == {"rpm": 4, "gps": 12}


def test_merge_skips_a_shard_its_count_has_not_reached(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    """A shard still at the count before the last raise holds its unmade partner's share
    in its full-at times, not in its snapshot (which is older). A merge that read it so,
    with the raise propagated before its transaction (the count fence then passes), took
    the old snapshot for the partner's share. Such a shard is not merged yet."""
    limit = Limit.per_minute("rpm", 600)
    limiter.set_limits("hot", [limit], resource="api")
    client = limiter.repository._runner.client
    now = clock.now_ms
    shard0 = _shard_item(0, 4, 100_000, now)
    shard0[keys.A_QUIET_SINCE] = keys.n(now - 3_600_000)
    shard0[keys.A_SHARD_DOUBLED] = keys.n(now - 3_600_000)
    # Shard 1 at 2 shards: 60 tokens for itself and unmade shard 3; its snapshot is
    # from its own making, when it was full.
    shard1 = _with_snapshot(_shard_item(1, 2, 60_000, now), 2, 300_000, now)
    for item in (shard0, shard1, _shard_item(2, 4, 100_000, now)):
        client.put_item(TableName=table_name, Item=item)

    def propagate() -> None:
        client.update_item(
            **keys.propagate_shard_count(
                table_name, keys.bucket_key("default", "hot", "api", 1), 4, ["rpm"], now_ms=now
            )
        )

    config = AggregatorConfig(table=table_name, merge_quiet_ms=60_000)
    cand = MergeCandidate("default", "hot", "api", 4, "1")
    before = limiter.available("hot", "api", limits=[limit])
    merged = limiter.repository.run(_after_first_call(merge(config, cand, now), propagate))
    assert limiter.available("hot", "api", limits=[limit]) == before == {"rpm": 260}
    assert not merged


def _raise_back(limiter: SyncRateLimiter, table_name: str, doubler: str, now: int) -> None:
    """A raise from one shard to two, tried as `doubler` tries it, each after its check
    (flows/scaling/made.py): the aggregator's (a batch that proves the partition hot), or a
    client's after a good write, or after a throttle (which reads shard 0 first)."""
    if doubler == "aggregator":
        config = AggregatorConfig(table=table_name)
        write = shards_module._double(
            ("default", "hot", "api"), 1, config, now, now - 1000, ("1",), ["rpm"]
        )
        assert limiter.repository.run(execute(StreamPlan(writes=[write]), config, now)) == []
        return
    state = limiter.repository.state
    confirm = doubler == "throttled client"
    limiter.repository.run(double(state, "hot", "api", now, now - 1000, confirm, ["rpm"]))


def _count(limiter: SyncRateLimiter) -> int:
    return keys.get_n(_shard_items(limiter, "hot", "api", 1)[0], keys.A_SHARD_COUNT)


def _drained_and_refilled(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> tuple[Limit, int]:
    """Two shards merged to one, 100 tokens left on shard 0, shard 1 drained and since
    refilled (its freeze over): (the limit, the time now)."""
    limit = Limit.per_minute("rpm", 600)
    limiter.set_limits("hot", [limit], resource="api")
    client = limiter.repository._runner.client
    now = clock.now_ms
    for shard in range(2):
        item = _shard_item(shard, 2, 100_000, now)
        if shard == 0:
            item[keys.A_QUIET_SINCE] = keys.n(now - 3_600_000)
            item[keys.A_SHARD_DOUBLED] = keys.n(now - 3_600_000)
        client.put_item(TableName=table_name, Item=item)
    config = AggregatorConfig(table=table_name, merge_quiet_ms=60_000)
    cand = MergeCandidate("default", "hot", "api", 2, "1")
    assert limiter.repository.run(merge(config, cand, now))
    later = now + config.freeze_ms + 120_000
    spent = keys.decode_bucket(_shard_item(0, 1, 100_000, later)).limits["rpm"].full_at
    key0 = keys.bucket_key("default", "hot", "api", 0)
    client.update_item(
        TableName=table_name, Key=key0, UpdateExpression="SET b_rpm_fa = :fa",
        ExpressionAttributeValues={":fa": keys.n(spent)},
    )  # fmt: skip
    clock.advance((later - now) / 1000)
    return limit, later


@pytest.mark.parametrize("doubler", ["aggregator", "client", "throttled client"])
def test_a_doubling_back_over_a_refilled_drained_shard_creates_no_tokens(
    limiter: SyncRateLimiter, table_name: str, clock: Clock, doubler: str
) -> None:
    """The simulator's shards focus (issue 35): a 2 -> 1 merge drains shard 1, which
    refills once its freeze is over. A doubling back that counted it as it stood would
    count its whole share while shard 0 keeps half of what it holds, so a partly spent
    entity would offer more than it held (100 held, 350 offered). The aggregator's raise
    deletes it first: shard 1 is then made from shard 0's snapshot, as any shard a raise
    makes room for. A client may not delete (least privilege): it does not raise, and
    the aggregator's raise follows."""
    limit, later = _drained_and_refilled(limiter, table_name, clock)
    client = limiter.repository._runner.client
    before = limiter.available("hot", "api", limits=[limit])
    key1 = keys.bucket_key("default", "hot", "api", 1)
    _raise_back(limiter, table_name, doubler, later)
    assert limiter.available("hot", "api", limits=[limit]) == before == {"rpm": 100}
    if doubler != "aggregator":
        assert _count(limiter) == 1 and "Item" in client.get_item(TableName=table_name, Key=key1)
        _raise_back(limiter, table_name, "aggregator", later)
    assert _count(limiter) == 2
    assert limiter.available("hot", "api", limits=[limit]) == before
    assert "Item" not in client.get_item(TableName=table_name, Key=key1)
    # Made again by its first acquire (when one draws it), from shard 0's snapshot: still
    # no token more.
    for _ in range(20):
        with limiter.acquire("hot", "api", {"rpm": 1}, limits=[limit]):
            pass
    assert limiter.available("hot", "api", limits=[limit])["rpm"] <= 100 - 20


def _aggregator_without_delete(table_name: str, clock: Clock) -> SyncRepository:
    """A repository on the aggregator's grants as a stack deployed before `DeleteItem` was
    granted has them (or a permissions boundary that denies it), on moto's IAM check. Its
    resources are "*": moto matches a statement's resource against "*" only."""
    import json

    import boto3

    from zae_limiter.infra import policy

    iam = boto3.client("iam")
    iam.create_user(UserName="aggregator")
    allowed = [a for a in policy.actions("aggregator") if a != "dynamodb:DeleteItem"]
    document = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": allowed, "Resource": "*"},
    ]}  # fmt: skip
    iam.put_user_policy(
        UserName="aggregator", PolicyName="old-stack", PolicyDocument=json.dumps(document)
    )
    key = iam.create_access_key(UserName="aggregator")["AccessKey"]
    client = boto3.client(
        "dynamodb",
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
    )
    return SyncRepository.open(name=table_name, client=client, clock=clock)


def test_an_aggregator_that_may_not_delete_a_drained_shard_waits_and_says_why(
    limiter: SyncRateLimiter, table_name: str, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A raise over a drained shard deletes it first. An aggregator role without
    `DeleteItem` is refused: the raise waits, creates nothing, says which grant is missing,
    and reports its records so that they come again (not dropped as a throttle would be);
    once granted, the next delivery raises."""
    from moto.core.authorization import enable_iam_authentication

    limit, later = _drained_and_refilled(limiter, table_name, clock)
    before = limiter.available("hot", "api", limits=[limit])
    denied = _aggregator_without_delete(table_name, clock)
    config = AggregatorConfig(table=table_name)
    write = shards_module._double(
        ("default", "hot", "api"), 1, config, later, later - 1000, ("7",), ["rpm"]
    )
    with enable_iam_authentication(), caplog.at_level("WARNING", "zae_limiter.aggregator"):
        failed = denied.run(execute(StreamPlan(writes=[write]), config, later))
    denied.close()
    assert failed == ["7"]
    assert "dynamodb:DeleteItem" in caplog.text and "zae-limiter deploy" in caplog.text
    assert _count(limiter) == 1
    assert limiter.available("hot", "api", limits=[limit]) == before == {"rpm": 100}
    assert limiter.repository.run(execute(StreamPlan(writes=[write]), config, later)) == []
    assert _count(limiter) == 2
    assert limiter.available("hot", "api", limits=[limit]) == before
