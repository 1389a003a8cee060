"""`top`'s arithmetic, pure: stream records in, rates, percentages and bucket state out."""

from __future__ import annotations

from dataclasses import replace
from itertools import count
from typing import Any

import pytest

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.models import BucketState
from zae_limiter.top.rates import Filters, Tally

T0 = 1_780_000_000_000
_seq = count(1)
RPM = LimitState(capacity_milli=100_000, refill_amount_milli=100_000, refill_period_ms=60_000)


def image(entity: str = "hot", resource: str = "gpt", shard: int = 0, *, ns: str = "ns",
          consumed: int = 0, tokens: int = 100_000, count: int = 1,
          at_ms: int = T0) -> dict[str, Any]:  # fmt: skip
    # Full at `at_ms` less the tokens missing, in the stored units (ms x refill amount).
    missing = (RPM.capacity_milli - tokens) * RPM.refill_period_ms * count
    limit = replace(RPM, total_consumed_milli=consumed,
                    full_at=at_ms * RPM.refill_amount_milli + missing)  # fmt: skip
    state = BucketState(entity, resource, shard, count, at_ms, {"rpm": limit})
    return keys.new_bucket_item(ns, state, at_ms)


def modify(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"SequenceNumber": str(next(_seq))}
    item = new or old or {}
    body["Keys"] = {keys.PK: item[keys.PK], keys.SK: item[keys.SK]}
    if old is not None:
        body["OldImage"] = old
    if new is not None:
        body["NewImage"] = new
    name = "REMOVE" if new is None else ("INSERT" if old is None else "MODIFY")
    return {"eventName": name, "dynamodb": body}


def steady(tally: Tally, seconds: int, per_second_milli: int, start_s: int = 0,
           entity: str = "hot", **kw: Any) -> None:  # fmt: skip
    """One write a second, each consuming `per_second_milli`."""
    for i in range(start_s, start_s + seconds):
        before = image(entity, consumed=i * per_second_milli, **kw)
        after = image(entity, consumed=(i + 1) * per_second_milli, **kw)
        tally.add([modify(before, after)], T0 + (i + 1) * 1000)


def test_rates_over_ten_and_sixty_seconds() -> None:
    tally = Tally(T0)
    steady(tally, 20, 1000)  # 1 rpm token a second for 20 s
    (row,) = tally.snapshot(T0 + 20_000)
    (rpm,) = row.limits
    assert rpm.rate_10s == pytest.approx(1.0)
    assert rpm.rate_60s == pytest.approx(1.0)  # 20 tokens over the 20 s seen
    assert rpm.pct_10s == pytest.approx(60.0)  # the refill is 100/60 s a second
    (later,) = tally.snapshot(T0 + 30_000)[0].limits
    assert later.rate_10s == 0.0
    assert later.rate_60s == pytest.approx(20 / 30)
    (gone,) = tally.snapshot(T0 + 81_000)[0].limits
    assert gone.rate_60s == 0.0


def test_tokens_left_are_refilled_to_now_and_reserves_counted() -> None:
    tally = Tally(T0)
    after = image(tokens=40_000, consumed=60_000)
    after[keys.reserve_attr("rpm", keys.reserve_epoch(T0))] = keys.n(7_000)
    tally.add([modify(image(), after)], T0)
    (rpm,) = tally.snapshot(T0 + 6_000)[0].limits  # 6 s of 100/min: +10 tokens
    # Held reserves come out of the room: 100 - 7 held - (60 missing - 10 refilled).
    assert (rpm.tokens_left, rpm.capacity, rpm.reserved) == (43, 100, 7)


def test_busiest_first_by_rate_pct_or_shards_and_filters() -> None:
    tally = Tally(T0)
    steady(tally, 10, 3000, entity="hot")
    steady(tally, 10, 1000, entity="warm", count=4)
    steady(tally, 10, 2000, entity="other", resource="claude")
    assert [r.entity_id for r in tally.snapshot(T0 + 10_000)] == ["hot", "other", "warm"]
    assert next(r.entity_id for r in tally.snapshot(T0 + 10_000, sort="pct")) == "hot"
    by_shards = tally.snapshot(T0 + 10_000, sort="shards")
    assert next((r.entity_id, r.shard_count) for r in by_shards) == ("warm", 4)
    only = Filters(resource="gpt", entity_prefix="wa")
    assert [r.entity_id for r in tally.snapshot(T0 + 10_000, only)] == ["warm"]
    assert tally.snapshot(T0 + 10_000, Filters(namespace="elsewhere")) == []
    assert len(tally.snapshot(T0 + 10_000, top=2)) == 2
    with pytest.raises(ValueError, match="sort"):
        tally.snapshot(T0, sort="name")


def test_shards_counted_and_a_removed_shard_forgotten() -> None:
    tally = Tally(T0)
    first = image(shard=0, count=2)
    second = image(shard=1, count=2)
    tally.add([modify(None, first), modify(None, second)], T0)
    row = tally.snapshot(T0)[0]
    assert (row.shard_count, row.shards_seen) == (2, 2)
    tally.add([modify(second, None)], T0 + 1)
    assert tally.snapshot(T0 + 1)[0].shards_seen == 1


def test_other_items_are_ignored_and_broken_bucket_records_skipped() -> None:
    tally = Tally(T0)
    entity = {keys.PK: keys.s("ns/ENTITY#x"), keys.SK: keys.s("#META")}
    broken = modify(image(), image(consumed=1000))
    broken["eventName"] = "SOMETHING"
    tally.add([modify(None, entity), broken], T0)
    assert tally.snapshot(T0 + 1000) == [] and tally.skipped == 1


def test_takes_that_leave_a_limit_below_zero_are_counted_as_over() -> None:
    """A soft limit's would-be rejections (docs/quotas.md, "Soft limits"): a take whose
    new image is in debt counts; one that leaves tokens, or gives back, does not."""
    tally = Tally(T0)
    tally.add([modify(image(tokens=1_000, consumed=99_000), image(tokens=0, consumed=100_000))], T0)
    tally.add([modify(image(tokens=0, consumed=100_000), image(tokens=-3_000, consumed=103_000))],
              T0)  # fmt: skip
    tally.add([modify(image(tokens=-3_000, consumed=103_000),
                      image(tokens=-5_000, consumed=105_000))], T0)  # fmt: skip
    tally.add([modify(image(tokens=-5_000, consumed=105_000),
                      image(tokens=-4_000, consumed=104_000))], T0)  # fmt: skip
    (rpm,) = tally.snapshot(T0)[0].limits
    assert rpm.over_60s == 2
    assert rpm.to_dict()["over_60s"] == 2
    assert tally.snapshot(T0 + 61_000)[0].limits[0].over_60s == 0
