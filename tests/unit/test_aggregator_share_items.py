"""Share items of a global limit on the stream (docs/global.md, "Usage, top"): the
aggregator adds what each region's share consumed to the entity's usage snapshots, fenced
per share item, and `top` shows the whole limit with each region's share under it. Pure."""

from __future__ import annotations

from typing import Any

from tests.unit.test_aggregator_processor import CONFIG, T0, image, modify, record
from zae_limiter import keys
from zae_limiter.aggregator.processor import process
from zae_limiter.aggregator.share_log import share_lines
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk
from zae_limiter.limits import Limit
from zae_limiter.top.rates import Tally

REGIONS = ("us-east-1", "eu-west-1")
WHOLE = Limit.per_second("gps", 20).across(*REGIONS)


def share(region: str, consumed: int, entity: str = "e1", **extra: int) -> dict[str, Any]:
    fields = {**core.new_fields(WHOLE, REGIONS, region), rk.ShareAttr.CONSUMED: consumed}
    fields.update(extra)
    item = {attr: keys.n(value) for attr, value in fields.items()}
    return {**item, **rk.share_key("ns", entity, "gpt", "gps", region)}


def test_share_items_count_as_the_entitys_usage_fenced_per_item() -> None:
    us0, us1, us2 = share("us-east-1", 0), share("us-east-1", 3_000), share("us-east-1", 2_000)
    eu0, eu1 = share("eu-west-1", 0), share("eu-west-1", 4_000)
    bucket0, bucket1 = image(rpm_tc=0), image(rpm_tc=1_000)
    batch = [
        record("INSERT", us0, None, seq=21),
        modify(us0, us1, seq=22),
        modify(us1, us2, seq=23),  # a rollback of one token
        record("INSERT", eu0, None, seq=24),
        modify(eu0, eu1, seq=25),  # replicated from eu-west-1: its stream record here
        modify(bucket0, bucket1, seq=26),
        modify(us2, share("us-east-1", 2_000, pt=600_000, vr=2), seq=27),  # a transfer
    ]
    plan = process(batch, CONFIG, T0)
    assert plan.failed == [] and plan.merges == []
    (write,) = plan.writes
    assert write.usage is not None
    snapshot = write.usage.snapshot()
    assert snapshot.counters == {"gps": 6_000, "rpm": 1_000}
    assert snapshot.total_events == 3  # two takes, and the bucket's
    fences = write.usage.fences()
    us_fence = rk.share_fence_id("gps", "us-east-1")
    eu_fence = rk.share_fence_id("gps", "eu-west-1")
    # Only the records that consumed are counted (and fenced), as for a bucket.
    assert fences == {0: (26, 26), us_fence: (22, 23), eu_fence: (25, 25)}
    # Delivered again: each item's fence drops what it counted.
    again = write.usage.without({us_fence: 23, eu_fence: 25, 0: 26})
    assert again is None


def test_a_broken_share_record_is_reported() -> None:
    broken = share("us-east-1", 1_000)
    broken[keys.PK] = keys.s("ns/GSHARE#only-two#parts")
    plan = process([record("INSERT", broken, None, seq=31)], CONFIG, T0)
    assert plan.failed == ["31"]


def test_top_shows_the_whole_limit_and_each_regions_share() -> None:
    tally = Tally(T0 - 10_000)
    at = T0
    moved = share("us-east-1", 5_000, pt=750_000, cp=15_000, ra=15_000)
    tally.add(
        [
            record("INSERT", share("us-east-1", 0), None),
            modify(share("us-east-1", 0), moved),
            record("INSERT", share("eu-west-1", 2_000, pt=250_000, cp=5_000, ra=5_000), None),
        ],
        at,
    )
    (row,) = tally.snapshot(at)
    (gps,) = row.limits
    assert (gps.name, gps.capacity, gps.refill_per_second) == ("gps", 20, 20.0)
    assert gps.rate_10s == 0.7  # 5 + 2 tokens (an insert counts what it holds) in 10 s
    assert [(s.region, s.percent, s.capacity) for s in gps.shares] == [
        ("eu-west-1", 25.0, 5),
        ("us-east-1", 75.0, 15),
    ]
    assert gps.tokens_left == sum(s.tokens_left for s in gps.shares) == 20  # both full
    assert gps.to_dict()["shares"][1] == {
        "region": "us-east-1", "percent": 75.0, "capacity": 15, "tokens_left": 15,
    }  # fmt: skip


def test_the_handler_logs_the_latest_share_of_each_item_for_the_dashboard() -> None:
    first, later = share("us-east-1", 0), share("us-east-1", 3_000, pt=600_000, cp=12_000)
    records = [
        record("INSERT", first, None),
        modify(first, later),
        record("INSERT", share("eu-west-1", 0), None),
        modify(image(rpm_tc=0), image(rpm_tc=1_000)),  # a bucket: no line
        record("REMOVE", None, share("eu-west-1", 0)),  # no new image: no line
    ]
    lines = share_lines(records, T0)
    assert [(x["region"], x["percent"], x["capacity"]) for x in lines] == [
        ("us-east-1", 60.0, 12.0),
        ("eu-west-1", 50.0, 10.0),
    ]
    assert lines[0]["zael"] == "share" and lines[0]["entity"] == "e1"
    assert lines[0]["limit"] == "gps" and lines[0]["resource"] == "gpt"

