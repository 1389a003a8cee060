"""Global limits declared like any other (docs/global.md, "Declaring a global limit"):
stored at an entity, resource or system level, or passed to acquire; `acquire` takes
this region's share of them with one write to the region's own share item (or none, from
a reserve or a known shortage), and leaves a table without them as it was."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from zae_limiter import Limit, RateLimitExceeded, ValidationError
from zae_limiter.cli.spec import format_limit, parse_limit, parse_limits_file
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk
from zae_limiter.keys.entities import decode_limits, encode_limits

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")  # the test client is in us-east-1
GLOBAL = Limit.per_second("rps", 300).across(*REGIONS)


def _share_items(api: Api) -> list[dict[str, object]]:
    items = api.run(api.repo.client.scan(TableName=api.repo.table_name))["Items"]
    return [i for i in items if rk.ShareAttr.SHARE_PREFIX in i["PK"]["S"]]


def test_a_stored_global_limit_is_taken_from_this_regions_share(api: Api) -> None:
    api.set_limits("tenant", [GLOBAL], "api")
    assert api.get_limits("tenant", "api") == (GLOBAL,)  # stored with its regions
    with api.acquire("tenant", "api", {"rps": 1}):
        pass
    (item,) = _share_items(api)
    image = core.decode(item)
    assert image.region == "us-east-1"
    assert image.capacity_milli == 300_000 * core.initial_parts(REGIONS, "us-east-1") // 10**6
    assert image.consumed_milli == 1000
    with api.meter() as m:
        with api.acquire("tenant", "api", {"rps": 1}):
            pass
    # One local write, as for a regional limit (the keeper's reads run beside it).
    assert [op for op in m.ops if op != "query"] == ["update_item"]
    # No bucket item: a global limit is enforced on the share item alone.
    items = api.run(api.repo.client.scan(TableName=api.repo.table_name))["Items"]
    assert not [i for i in items if "BUCKET#" in i["PK"]["S"]]


def test_a_global_resource_default_rejects_past_the_share(api: Api) -> None:
    api.set_resource_defaults("api", [Limit.per_minute("rpm", 30).across(*REGIONS)])
    admitted = 0
    with pytest.raises(RateLimitExceeded) as caught:
        for _ in range(20):
            with api.acquire("anyone", "api", {"rpm": 1}):
                admitted += 1
    assert admitted == 9  # a third of 30, rounded down, until a keeper moves parts here
    (violation,) = caught.value.violations
    assert (violation.limit_name, violation.capacity) == ("rpm", 9)
    assert caught.value.retry_after_seconds > 0


def test_a_rejected_global_limit_gives_back_the_regional_ones(api: Api) -> None:
    regional = Limit.per_minute("rpm", 100)
    tight = Limit.per_minute("gpm", 6).across(*REGIONS)  # 1.99: one token here
    limits = [regional, tight]
    with api.acquire("mixed", "api", {"rpm": 1, "gpm": 1}, limits=limits):
        pass
    with pytest.raises(RateLimitExceeded) as caught:
        with api.acquire("mixed", "api", {"rpm": 1, "gpm": 1}, limits=limits):
            pass
    assert [v.limit_name for v in caught.value.violations] == ["gpm"]
    assert api.available("mixed", "api", limits=[regional])["rpm"] == 99  # given back


def test_a_region_outside_the_limit_is_refused(api: Api) -> None:
    elsewhere = Limit.per_second("rps", 10).across("eu-west-1", "ap-southeast-1")
    with pytest.raises(ValidationError, match="us-east-1"):
        with api.acquire("tenant", "api", {"rps": 1}, limits=[elsewhere]):
            pass


def test_no_global_limit_no_share_item(api: Api) -> None:
    with api.acquire("plain", "api", {"rps": 1}, limits=[Limit.per_second("rps", 5)]):
        pass
    assert _share_items(api) == []
    assert api.repo.state.shares is not None and not api.repo.state.shares.targets


def test_the_declaration_round_trips() -> None:
    spec = "rps:300/sec:global=us-east-1,eu-west-1,ap-southeast-1"
    assert parse_limit(spec) == GLOBAL
    assert format_limit(GLOBAL) == spec
    assert decode_limits({"limits": encode_limits([GLOBAL])}) == (GLOBAL,)
    assert GLOBAL.describe() == "300/sec across us-east-1,eu-west-1,ap-southeast-1"
    desired = parse_limits_file(f"resources:\n  api: ['{spec}', 'rpm:10/min']\n")
    (limits,) = desired.levels.values()
    assert limits[0] == GLOBAL and not limits[1].is_global


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Limit.per_second("rps", 5).across("us-east-1"), "two or more"),
        (lambda: Limit.per_second("rps", 5).across("a", "a"), "distinct"),
        (lambda: Limit.per_second("rps", 5, soft=True).across("a", "b"), "soft"),
        (lambda: Limit.quota("q", 5).across("a", "b"), "quota"),
        (lambda: Limit.per_second("rps", 5).across("US East", "b"), "region names"),
    ],
)
def test_bad_declarations_say_what_is_wrong(build: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        build()  # type: ignore[operator]
