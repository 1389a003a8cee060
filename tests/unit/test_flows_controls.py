"""Operator controls as flows on canned results: what a reset and a top-up send, how a
reset plans again from ALL_OLD, and that a top-up is never sent twice."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit._flowkit import NS, RPM, T0, TABLE, TPM, answered, bucket, limit_part
from zae_limiter import keys
from zae_limiter.config_cache import ConfigCache
from zae_limiter.errors import (
    CALL_TIMEOUT,
    TRANSACTION_CANCELLED,
    RateLimiterUnavailable,
    ValidationError,
)
from zae_limiter.flows import Call, Result
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.offpath.controls import reset_bucket, split_grant, top_up
from zae_limiter.flows.records.audit import Auditor

AUDITOR = Auditor("ops", T0, None, iter(f"id{i}" for i in range(100)).__next__)


def state() -> RepoState:
    return RepoState(table=TABLE, namespace=NS, config_cache=ConfigCache(60))


def shard(shard_id: int, tokens: dict[str, int], count: int = 1) -> dict[str, Any]:
    return keys.new_bucket_item(NS, replace(bucket(T0, tokens, count), shard_id=shard_id), T0)


def answers(items: list[dict[str, Any]], commits: list[Any]) -> Any:
    """Answer the shard discovery from `items`, and each transaction from `commits`."""
    left = list(commits)

    def answer(call: Call) -> Any:
        if call.op == "query":
            return Result({"Items": [keys.item_key(i) for i in items]})
        if call.op == "batch_get_item":
            return Result({"Responses": {TABLE: items}})
        if call.op == "get_item":
            return Result({"Item": items[0]})
        assert call.op == "transact_write_items"
        return left.pop(0)

    return answer


def cancelled(*reasons: dict[str, Any]) -> Result:
    return Result({"CancellationReasons": list(reasons)}, ok=False)


def transactions(calls: list[Call]) -> list[dict[str, Any]]:
    return [c.params for c in calls if c.op == "transact_write_items"]


def test_a_reset_sets_every_limit_full_now_under_the_values_read() -> None:
    items = [shard(0, {"rpm": 2_000, "tpm": 500_000}, 2), shard(1, {"rpm": 0, "tpm": 0}, 2)]
    value, calls, _ = answered(
        reset_bucket(state(), "e1", "gpt", T0, AUDITOR, "why"), answers(items, [Result()])
    )
    assert value == 2
    [sent] = transactions(calls)
    parts = sent["TransactItems"]
    assert [list(p) for p in parts] == [["Update"], ["Update"], ["Put"]]
    for part, item in zip(parts[:2], items, strict=True):
        update = part["Update"]
        assert "ReturnValues" not in update
        assert update["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
        for limit in (RPM, TPM):
            form, values = limit_part(update, limit.name)
            stored = keys.decode_bucket(item).limits[limit.name]
            assert form == "rebase"
            assert values["amount"] == T0 * stored.refill_amount_milli  # full now
            assert values["was_full_at"] == stored.full_at  # as read
    assert sent["ClientRequestToken"]


def test_a_reset_that_lost_to_an_acquire_plans_again_from_all_old() -> None:
    read = shard(0, {"rpm": 5_000})
    newer = shard(0, {"rpm": 3_000})  # an acquire took 2 tokens in between
    lost = cancelled({"Code": "ConditionalCheckFailed", "Item": newer}, {"Code": "None"})
    value, calls, _ = answered(
        reset_bucket(state(), "e1", "gpt", T0, AUDITOR, None),
        answers([read], [lost, Result()]),
    )
    assert value == 1
    first, second = transactions(calls)
    parts = [limit_part(t["TransactItems"][0]["Update"], "rpm")[1] for t in (first, second)]
    of = [part["was_full_at"] for part in parts]
    assert of == [
        keys.decode_bucket(read).limits["rpm"].full_at,
        keys.decode_bucket(newer).limits["rpm"].full_at,
    ]
    assert first["ClientRequestToken"] != second["ClientRequestToken"]
    event = keys.decode_audit(second["TransactItems"][1]["Put"]["Item"])
    assert event.before == {"tokens": {"rpm": 3.0}}  # what it replaced, not what it read


def test_a_reset_reads_the_shard_again_when_the_cancellation_shows_no_item() -> None:
    items = [shard(0, {"rpm": 5_000})]
    lost = cancelled({"Code": "ConditionalCheckFailed"}, {"Code": "None"})
    _, calls, _ = answered(
        reset_bucket(state(), "e1", "gpt", T0, AUDITOR, None),
        answers(items, [lost, Result()]),
    )
    ops = [c.op for c in calls]
    assert ops[-2:] == ["get_item", "transact_write_items"]
    assert calls[-2].params["ConsistentRead"] is True


def test_a_reset_that_lost_to_a_transaction_conflict_waits_and_tries_again() -> None:
    conflict = RateLimiterUnavailable("conflict", code=TRANSACTION_CANCELLED)
    value, calls, slept = answered(
        reset_bucket(state(), "e1", "gpt", T0, AUDITOR, None),
        answers([shard(0, {"rpm": 0})], [conflict, Result()]),
    )
    assert value == 1 and slept > 0 and len(transactions(calls)) == 2


def test_a_top_up_splits_the_amount_over_what_the_shards_lack() -> None:
    shards = [bucket(T0, {"rpm": 2_000}, 2), replace(bucket(T0, {"rpm": 0}, 2), shard_id=1)]
    # rpm 10 over 2 shards: 5 each; shard 0 lacks 3, shard 1 lacks 5.
    assert split_grant(shards, {"rpm": 6_000}, T0) == [{"rpm": 3_000}, {"rpm": 3_000}]
    assert split_grant(shards, {"rpm": 2_000}, T0) == [{"rpm": 2_000}, {}]
    assert split_grant(shards, {"rpm": 99_000}, T0) == [{"rpm": 3_000}, {"rpm": 5_000}]


def test_a_top_up_is_one_transaction_of_give_backs_by_exact_amounts() -> None:
    items = [shard(0, {"rpm": 2_000}, 2), shard(1, {"rpm": 0}, 2)]
    done, calls, _ = answered(
        top_up(state(), "e1", "gpt", {"rpm": 6}, T0, AUDITOR, "goodwill"),
        answers(items, [Result()]),
    )
    assert done.granted == {"rpm": 6.0} and done.refused == {} and done.shards == 2
    [sent] = transactions(calls)
    unit = RPM.refill_period_ms * 2  # full-at per millitoken of a half share
    moved = [
        int(p["Update"]["ExpressionAttributeValues"][":delta_0"]["N"])
        for p in sent["TransactItems"][:2]
    ]
    assert moved == [-3_000 * unit, -3_000 * unit]
    assert sent["ClientRequestToken"]


def test_a_top_up_whose_answer_is_lost_is_not_sent_again() -> None:
    lost = RateLimiterUnavailable("no answer", code=CALL_TIMEOUT)
    error, calls, _ = answered(
        top_up(state(), "e1", "gpt", {"rpm": 1}, T0, AUDITOR, None),
        answers([shard(0, {"rpm": 0})], [lost]),
    )
    assert isinstance(error, RateLimiterUnavailable) and error.code == CALL_TIMEOUT
    assert len(transactions(calls)) == 1


@pytest.mark.parametrize("amounts", [{}, {"rpm": 0}, {"rpm": -1}, {"rpm": 1.5}, {"rpm": True}])
def test_a_top_up_wants_positive_whole_amounts(amounts: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="top-up"):
        answered(top_up(state(), "e1", "gpt", amounts, T0, AUDITOR, None), answers([], []))
