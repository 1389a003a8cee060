"""The aggregator's pure core on recorded stream batches: the exact writes it asks for."""

from __future__ import annotations

from typing import Any

import pytest

from zae_limiter import keys
from zae_limiter.aggregator.apply import execute
from zae_limiter.aggregator.handler import batch_response, config_from_env, process_batch
from zae_limiter.aggregator.plan import AggregatorConfig
from zae_limiter.aggregator.processor import process
from zae_limiter.aggregator.records import window_bounds, window_starts
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Result, run_pure

T0 = 1_795_000_000_000  # 2026-11-18T11:06:40Z
CONFIG = AggregatorConfig(table="tbl", windows=("hourly",), merge_quiet_ms=60_000)
_seq = [1000]


def image(
    entity: str = "e1", resource: str = "gpt", shard: int = 0, **attrs: int
) -> dict[str, Any]:
    """A bucket item in wire format; `rpm_tk=5000` style keywords set limit fields."""
    item: dict[str, Any] = {
        **keys.bucket_key("ns", entity, resource, shard),
        keys.A_ENTITY_ID: keys.s(entity), keys.A_RESOURCE: keys.s(resource),
        keys.A_SHARD_ID: keys.n(shard), keys.A_SHARD_COUNT: keys.n(attrs.pop("sc", 1)),
        keys.A_REFILL: keys.n(attrs.pop("rf", T0)),
        "b_rpm_cp": keys.n(100_000), "b_rpm_ra": keys.n(100_000), "b_rpm_rp": keys.n(60_000),
        "b_wcu_cp": keys.n(1000),
    }  # fmt: skip
    for name, value in attrs.items():
        item[name if name in ("ws", "wn", "qs", "sd") else f"b_{name}"] = keys.n(value)
    return item


def record(event: str, new: dict[str, Any] | None, old: dict[str, Any] | None,
           at_ms: int = T0, seq: int | None = None) -> dict[str, Any]:  # fmt: skip
    _seq[0] += 1
    body: dict[str, Any] = {
        "Keys": {k: (new or old or {})[k] for k in (keys.PK, keys.SK)},
        "SequenceNumber": str(seq if seq is not None else _seq[0]),
        "ApproximateCreationDateTime": at_ms / 1000,
    }
    if new is not None:
        body["NewImage"] = new
    if old is not None:
        body["OldImage"] = old
    return {"eventID": f"id{_seq[0]}", "eventName": event, "dynamodb": body}


def modify(before: dict[str, Any], after: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return record("MODIFY", after, before, **kw)


def test_window_starts_and_bounds() -> None:
    starts = window_starts(T0 // 3_600_000)
    assert starts["hourly"][0] == "2026-11-18T11:00Z"
    assert starts["daily"][0] == "2026-11-18"
    assert starts["monthly"] == ("2026-11", 1_796_083_200)  # 2026-12-01
    begin, end = window_bounds("monthly", "2026-12")
    assert (begin.month, end.year, end.month) == (12, 2027, 1)


def test_unsharded_batch_one_exact_usage_write_per_window() -> None:
    a = image(rpm_tk=99_000, rpm_tc=1_000, tpm_tc=0)
    b = image(rpm_tk=97_000, rpm_tc=3_000, tpm_tc=500_000, wcu_tc=9_000)
    c = image(rpm_tk=97_000, rpm_tc=2_000, tpm_tc=500_000)  # a rollback of 1 rpm
    keys_only = {k: a[k] for k in (keys.PK, keys.SK)}
    batch = [
        record("INSERT", keys_only, None, seq=11),  # moto: a keys-only INSERT first
        record("INSERT", a, None, seq=12),
        modify(a, b, seq=13),
        modify(b, c, seq=14, at_ms=T0 + 5_000),
    ]
    plan = process(batch, CONFIG, T0 + 5_000)
    assert plan.failed == [] and [w.kind for w in plan.writes] == ["usage"]
    write = plan.writes[0]
    assert write.sequence_numbers == ("12", "13", "14")
    assert write.call == Call("update_item", {
        "TableName": "tbl",
        "Key": keys.usage_key("ns", "e1", "gpt", "hourly", "2026-11-18T11:00Z"),
        "UpdateExpression": "SET #e = :e, #r = :r, #w = :w, #ws = :ws, #k = :k, #g2p = :g2p, "
        "#g2s = :g2s, #g4p = :g4p, #g4s = :g4s, #ttl = :ttl, #q0 = :ql0 ADD #ev :ev, "
        "#u0 :u0, #u1 :u1",
        "ConditionExpression": "(attribute_not_exists(#q0) OR #q0 < :qf0)",
        "ExpressionAttributeNames": {
            "#e": "entity_id", "#r": "resource", "#w": "window", "#ws": "window_start",
            "#k": "kind", "#g2p": "GSI2PK", "#g2s": "GSI2SK", "#g4p": "GSI4PK",
            "#g4s": "GSI4SK", "#ttl": "ttl", "#ev": "total_events", "#q0": "sq_0",
            "#u0": "u_rpm", "#u1": "u_tpm",
        },
        "ExpressionAttributeValues": {
            ":e": {"S": "e1"}, ":r": {"S": "gpt"}, ":w": {"S": "hourly"},
            ":ws": {"S": "2026-11-18T11:00Z"}, ":k": {"S": "usage"},
            ":g2p": {"S": "ns/RESOURCE#gpt"}, ":g2s": {"S": "USAGE#hourly#2026-11-18T11:00Z#e1"},
            ":g4p": {"S": "ns"}, ":g4s": {"S": "USAGE#e1#gpt#hourly#2026-11-18T11:00Z"},
            ":ttl": {"N": str(1_794_999_600 + 3600 + 90 * 86400)}, ":ev": {"N": "2"},
            ":qf0": {"N": "12"}, ":ql0": {"N": "14"},
            ":u0": {"N": "2000"}, ":u1": {"N": "500000"},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    })  # fmt: skip


def test_sharded_and_cascade_batches_fence_each_shard_and_entity() -> None:
    s0 = image(shard=0, sc=2, rpm_tk=50_000, rpm_tc=0)
    s1 = image(shard=1, sc=2, rpm_tk=50_000, rpm_tc=0)
    parent = image(entity="org", rpm_tk=100_000, rpm_tc=0)
    batch = [
        modify(s0, image(shard=0, sc=2, rpm_tk=49_000, rpm_tc=1_000), seq=21),
        modify(s1, image(shard=1, sc=2, rpm_tk=48_000, rpm_tc=2_000), seq=22),
        modify(parent, image(entity="org", rpm_tk=97_000, rpm_tc=3_000), seq=23),
    ]
    plan = process(batch, AggregatorConfig(table="tbl"), T0)
    usage = {(w.usage.entity_id, w.usage.window): w for w in plan.by_kind("usage") if w.usage}
    assert sorted(usage) == [(e, w) for e in ("e1", "org") for w in ("daily", "hourly", "monthly")]
    mine = usage[("e1", "daily")].call.params
    assert mine["ConditionExpression"] == (
        "(attribute_not_exists(#q0) OR #q0 < :qf0) AND (attribute_not_exists(#q1) OR #q1 < :qf1)"
    )
    assert mine["ExpressionAttributeNames"]["#q1"] == "sq_1"
    assert mine["ExpressionAttributeValues"][":u0"] == {"N": "3000"}
    assert usage[("org", "monthly")].call.params["ExpressionAttributeValues"][":u0"] == {
        "N": "3000"
    }


def test_removes_and_other_items_contribute_nothing() -> None:
    gone = image(rpm_tk=1_000, rpm_tc=99_000)
    entity = {**keys.entity_key("ns", "e1"), "kind": keys.s("entity")}
    usage_item = keys.usage_key("ns", "e1", "gpt", "hourly", "2026-11-18T11:00Z")
    batch = [record("REMOVE", None, gone), record("INSERT", entity, None),
             record("MODIFY", usage_item, usage_item)]  # fmt: skip
    plan = process(batch, CONFIG, T0 + 60_000)
    assert plan.writes == [] and plan.merges == [] and plan.failed == []
    assert plan.changes == 1 and plan.skipped == 2


def test_malformed_bucket_records_are_reported_never_dropped_silently() -> None:
    good = modify(image(rpm_tk=5, rpm_tc=0), image(rpm_tk=5, rpm_tc=1_000), seq=31)
    bad_number = modify(image(rpm_tc=0), {**image(), "b_rpm_tc": {"N": "x"}}, seq=32)
    bad_key = record("MODIFY", {keys.PK: keys.s("ns/BUCKET#e1#gpt"), keys.SK: keys.s("#STATE")},
                     None, seq=33)  # fmt: skip
    bad_event = {**good, "eventName": "UPSERT"}
    bad_event["dynamodb"] = {**good["dynamodb"], "SequenceNumber": "34"}
    no_seq = modify(image(rpm_tc=0), image(rpm_tc=1_000))
    del no_seq["dynamodb"]["SequenceNumber"]
    plan = process([good, bad_number, bad_key, bad_event, no_seq, {"eventName": "X"}], CONFIG, T0)
    assert plan.failed == ["32", "33", "34"]
    assert plan.skipped == 2
    assert [w.sequence_numbers for w in plan.by_kind("usage")] == [("31",)]


def test_no_refill_is_ever_planned() -> None:
    """A bucket stores when it will be full: time refills it, the aggregator writes none."""
    before = image(rpm_tk=3_000, rpm_tc=0, rf=T0)
    after = image(rpm_tk=1_000, rpm_tc=2_000, rf=T0)
    plan = process([modify(before, after, seq=41)], CONFIG, T0 + 6_000)
    assert {w.kind for w in plan.writes} == {"usage"}


def test_doubling_at_80_percent_write_pressure_and_propagation() -> None:
    hot = image(sc=2, rpm_tk=40_000, rpm_tc=1_000, ws=T0 - 1_000, wn=1_700)
    plan = process([modify(image(sc=2, rpm_tk=40_000, rpm_tc=0), hot)], CONFIG, T0 + 1_000)
    (double,) = plan.by_kind("double")
    assert double.call.params == keys.double_shards(
        "tbl", keys.bucket_key("ns", "e1", "gpt", 0), 2, 4, T0 + 1_000, T0 - 1_000, ["rpm"]
    )
    # The raise snapshots what shard 0 holds: the shards it makes split that off.
    snapshot = "#split_0 = if_not_exists(#full_at_0, :no_snapshot)"
    assert snapshot in double.call.params["UpdateExpression"]
    # Shard 0 went from 2 to 4 in this batch: shard 1 learns it (2 and 3 do not exist yet).
    grown = modify(image(sc=2, rpm_tc=0), image(sc=4, rpm_tc=0), seq=51)
    stale = modify(image(shard=5, sc=2, rpm_tc=0), image(shard=5, sc=2, rpm_tc=0), seq=52)
    writes = process([grown, stale], CONFIG, T0).by_kind("propagate")
    assert [w.call.params["Key"] for w in writes] == [keys.bucket_key("ns", "e1", "gpt", 1)]
    assert writes[0].call.params == keys.propagate_shard_count(
        "tbl", keys.bucket_key("ns", "e1", "gpt", 1), 4, ["rpm"], now_ms=T0
    )


def test_doubling_needs_significant_evidence_on_a_low_write_limit() -> None:
    """A partition that takes 5 writes/s: 5 writes in 1.2 s pass 80% by chance one time
    in several (no doubling, as a client would not double either); 20 writes in 2 s are
    a partition running past its limit (doubling)."""
    before = image(sc=1, rpm_tc=0, wcu_cp=5)
    lucky = image(sc=1, rpm_tc=1_000, wcu_cp=5, ws=T0 - 1_200, wn=5)
    assert process([modify(before, lucky)], CONFIG, T0).by_kind("double") == []
    hot = image(sc=1, rpm_tc=1_000, wcu_cp=5, ws=T0 - 2_000, wn=20)
    (double,) = process([modify(before, hot)], CONFIG, T0).by_kind("double")
    assert double.call.params == keys.double_shards(
        "tbl", keys.bucket_key("ns", "e1", "gpt", 0), 1, 2, T0, T0 - 2_000, ["rpm"]
    )
    early = image(sc=1, rpm_tc=1_000, ws=T0 - 500, wn=900)  # under a second: no trend yet
    assert process([modify(before, early)], CONFIG, T0).by_kind("double") == []


def test_quiet_mark_then_merge_nomination_then_busy_clears() -> None:
    now = T0 + 3_600_000
    quiet = image(sc=4, rpm_tc=0, ws=now - 1_000, wn=10, sd=T0)
    plan = process([modify(quiet, quiet)], CONFIG, now)
    assert [w.call.params for w in plan.by_kind("quiet")] == [
        keys.mark_quiet("tbl", keys.bucket_key("ns", "e1", "gpt", 0), 4, now)
    ]
    marked = image(sc=4, rpm_tc=0, ws=now - 1_000, wn=10, sd=T0, qs=now - 60_000)
    (cand,) = process([modify(marked, marked, seq=61)], CONFIG, now).merges
    assert (cand.entity_id, cand.shard_count, cand.sequence_number) == ("e1", 4, "61")
    busy = image(sc=4, rpm_tc=0, ws=now - 1_000, wn=500, qs=now - 60_000)
    plan = process([modify(marked, busy)], CONFIG, now)
    assert plan.merges == [] and plan.by_kind("quiet")[0].call.params == keys.clear_quiet(
        "tbl", keys.bucket_key("ns", "e1", "gpt", 0)
    )
    unsharded = image(sc=1, rpm_tc=0, qs=T0)
    assert process([modify(unsharded, unsharded)], CONFIG, now).merges == []


def test_execute_writes_only_what_a_fence_has_not_counted() -> None:
    batch = [modify(image(rpm_tc=0), image(rpm_tc=1_000), seq=71),
             modify(image(rpm_tc=1_000), image(rpm_tc=3_000), seq=72)]  # fmt: skip
    plan = process(batch, CONFIG, T0)
    flow = execute(plan, CONFIG, T0)
    first = next(flow)
    assert first[0].params["ExpressionAttributeValues"][":u0"] == {"N": "3000"}
    # The snapshot already counted record 71 (a retried batch): only 72 is written.
    retry = flow.send((Result({}, ok=False, old={"sq_0": {"N": "71"}}),))
    values = retry[0].params["ExpressionAttributeValues"]
    assert (values[":u0"], values[":qf0"], values[":ev"]) == (
        {"N": "2000"},
        {"N": "72"},
        {"N": "1"},
    )
    with pytest.raises(StopIteration) as done:
        flow.send((Result({}),))
    assert done.value.value == []
    # Everything counted already: nothing more to write.
    assert (
        run_pure(execute(plan, CONFIG, T0), [(Result({}, ok=False, old={"sq_0": {"N": "99"}}),)])
        == []
    )


def test_failed_writes_and_malformed_records_are_reported_for_retry() -> None:
    good = modify(image(rpm_tc=0), image(rpm_tc=1_000), seq=81)
    bad = modify(image(rpm_tc=0), {**image(), "b_rpm_tc": {"N": "?"}}, seq=80)
    plan = process([bad, good], CONFIG, T0)
    failed = run_pure(execute(plan, CONFIG, T0), [(RateLimiterUnavailable("throttled"),)])
    assert failed == ["80", "81"]
    assert batch_response(failed) == {
        "batchItemFailures": [{"itemIdentifier": "80"}, {"itemIdentifier": "81"}]
    }


def test_process_batch_and_config_from_env() -> None:
    seen: list[Any] = []

    def run(flow: Any) -> Any:
        seen.append(flow)
        return run_pure(flow, [(Result({}),)])

    good = modify(image(rpm_tc=0), image(rpm_tc=1_000), seq=91)
    assert process_batch([good], CONFIG, run, T0) == [] and len(seen) == 1
    env = {
        "ZAEL_USAGE_WINDOWS": "daily, monthly",
        "ZAEL_MERGE_QUIET_SECONDS": "0",
    }
    arn = "arn:aws:dynamodb:us-east-1:1:table/my-table/stream/2026"
    config = config_from_env(env, [{"eventSourceARN": arn}])
    assert (config.table, config.windows, config.merge_quiet_ms) == (
        "my-table",
        ("daily", "monthly"),
        0,
    )
    with pytest.raises(ValueError):
        config_from_env({}, [])


def test_an_expired_bucket_loses_no_usage_and_counts_none_twice() -> None:
    """A bucket item TTL deletes (docs/quotas.md, Idle buckets expire): the writes before
    it are in the stream whatever happens to the item, the REMOVE adds nothing, and the
    item created again counts from zero."""
    spent = image(rpm_tc=3_000)
    batch = [
        record("INSERT", spent, None),
        modify(spent, image(rpm_tc=5_000)),
        record("REMOVE", None, image(rpm_tc=5_000)),  # the TTL's delete, a day later
        record("INSERT", image(rpm_tc=2_000), None),  # the next acquire makes it again
    ]
    plan = process(batch, CONFIG, T0 + 60_000)
    (usage,) = plan.by_kind("usage")
    assert usage.call.params["ExpressionAttributeValues"][":u0"] == {"N": "7000"}
