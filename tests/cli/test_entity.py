"""`zae-limiter entity ...`: tables, JSON, and the errors a user sees."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from zae_limiter import BucketState, Limit, ShardInfo, keys
from zae_limiter.bucket import LimitState
from zae_limiter.cli.entity import shard_report

if TYPE_CHECKING:
    from tests.cli.conftest import Zae


def test_create_prints_the_entity(zae: Zae) -> None:
    done = zae("entity", "create", "acme", "--display-name", "Acme Corp")
    assert done.code == 0, done.stderr
    assert "created entity acme" in done.stdout
    assert "Acme Corp" in done.stdout
    assert done.stderr == ""


def test_create_json_is_the_entity_and_nothing_else(zae: Zae) -> None:
    zae("entity", "create", "acme")
    done = zae("entity", "create", "k1", "--parent", "acme", "--cascade", "-o", "json")
    assert done.code == 0, done.stderr
    body = done.json()
    assert body == {
        "entity_id": "k1",
        "name": None,
        "parent_id": "acme",
        "cascade": True,
        "created_at_ms": body["created_at_ms"],
    }
    assert isinstance(body["created_at_ms"], int)


def test_create_twice_fails_with_one_line(zae: Zae) -> None:
    zae("entity", "create", "acme")
    done = zae("entity", "create", "acme")
    assert done.code == 1
    assert done.stdout == ""
    assert done.stderr.strip() == "error: entity 'acme' already exists"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["k1", "--parent", "ghost"], 1, "'ghost' does not exist"),
        (["k1", "--cascade"], 2, "cascade=True needs a parent_id"),
        (["bad#id"], 2, "contains '#'"),
    ],
)
def test_create_errors(zae: Zae, args: list[str], code: int, message: str) -> None:
    done = zae("entity", "create", *args)
    assert done.code == code
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(zae: Zae) -> None:
    done = zae("--debug", "entity", "create", "bad#id")
    assert done.code == 2
    assert "Traceback" in done.stderr


def test_missing_table_is_one_line_and_exit_1(zae: Zae) -> None:
    done = zae("entity", "list", "--name", "no-such-table")
    assert done.code == 1
    assert done.stderr.startswith("error: table 'no-such-table' not found")
    assert len(done.stderr.strip().splitlines()) == 1


def test_list_table_and_json(zae: Zae) -> None:
    zae("entity", "create", "acme", "--display-name", "Acme")
    zae("entity", "create", "k1", "--parent", "acme")
    zae("entity", "create", "solo")
    table = zae("entity", "list")
    assert table.code == 0
    assert "entities (3)" in table.stdout
    assert re.search(r"k1\s.*\sacme\s", table.stdout)
    children = zae("entity", "list", "--parent", "acme", "--output", "json").json()
    assert [e["entity_id"] for e in children["entities"]] == ["k1"]
    everyone = zae("entity", "list", "-o", "json").json()
    assert [e["entity_id"] for e in everyone["entities"]] == ["acme", "k1", "solo"]


def test_list_children_of_unknown_parent_fails(zae: Zae) -> None:
    done = zae("entity", "list", "--parent", "ghost")
    assert done.code == 1
    assert "entity 'ghost' does not exist" in done.stderr


def _arrange_limits(zae: Zae) -> None:
    zae("entity", "create", "acme")
    zae("entity", "create", "k1", "--parent", "acme")
    limiter = zae.limiter()
    limiter.set_system_defaults([Limit.per_minute("rpm", 1000)])
    limiter.set_resource_defaults("embed", [Limit.per_minute("rpm", 300)])
    limiter.set_limits("k1", [Limit.per_minute("rpm", 100)])
    limiter.set_limits("k1", [Limit.per_day("tpm", 10_000, 15_000)], resource="gpt-4")
    with limiter.acquire("k1", "gpt-4", {"tpm": 1_000}):
        pass


def test_show_says_where_each_limit_comes_from(zae: Zae) -> None:
    _arrange_limits(zae)
    done = zae("entity", "show", "k1", "-r", "gpt-4", "-r", "embed")
    assert done.code == 0, done.stderr
    rows = {
        line.split("│")[1].strip() + "/" + line.split("│")[2].strip(): line
        for line in done.stdout.splitlines()
        if line.count("│") >= 6
    }
    assert "entity" in rows["gpt-4/tpm"] and "14000" in rows["gpt-4/tpm"]
    assert "10000/day burst 15000" in rows["gpt-4/tpm"]
    assert "entity default" in rows["embed/rpm"]
    assert "parent" in done.stdout and "acme" in done.stdout


def test_show_json(zae: Zae) -> None:
    _arrange_limits(zae)
    zae.limiter().delete_limits("k1")  # the entity default goes: embed falls to its default
    body = zae("entity", "show", "k1", "-r", "gpt-4", "-r", "embed", "-r", "x", "-o", "json").json()
    assert body["entity"]["entity_id"] == "k1"
    assert body["children"] == []
    by_resource = {r["resource"]: r for r in body["resources"]}
    assert by_resource["gpt-4"]["source"] == "entity"
    assert by_resource["gpt-4"]["limits"] == [
        {
            "name": "tpm",
            "capacity": 15_000,
            "refill_amount": 10_000,
            "refill_period_seconds": 86400,
            "spec": "tpm:10000/day:15000",
            "available": 14_000,
        }
    ]
    assert by_resource["embed"]["source"] == "resource"
    assert by_resource["x"]["source"] == "system"


def test_show_without_resources_shows_the_entity_default(zae: Zae) -> None:
    _arrange_limits(zae)
    body = zae("entity", "show", "k1", "-o", "json").json()
    default = body["resources"][0]
    assert default["resource"] == "*"
    assert default["source"] == "entity_default"
    assert default["limits"][0]["spec"] == "rpm:100/min"
    assert default["limits"][0]["available"] is None
    table = zae("entity", "show", "acme")
    assert re.search(r"\*\s.*-\s.*none", table.stdout)
    assert "k1" in table.stdout  # acme's children


def test_show_lists_the_resources_the_entity_has_buckets_for(zae: Zae) -> None:
    _arrange_limits(zae)
    body = zae("entity", "show", "k1", "-o", "json").json()
    assert [r["resource"] for r in body["resources"]] == ["*", "gpt-4"]


def test_show_unknown_entity(zae: Zae) -> None:
    done = zae("entity", "show", "ghost", "-o", "json")
    assert done.code == 1
    assert done.stdout == ""
    assert "entity 'ghost' does not exist" in done.stderr


def test_delete_asks_and_no_keeps_the_entity(zae: Zae) -> None:
    zae("entity", "create", "acme")
    done = zae("entity", "delete", "acme", input="n\n")
    assert done.code == 1
    assert "Delete entity 'acme'" in done.stderr
    assert zae("entity", "show", "acme").code == 0
    done = zae("entity", "delete", "acme", input="y\n")
    assert done.code == 0
    assert zae("entity", "show", "acme").code == 1


def test_delete_yes_json(zae: Zae) -> None:
    zae("entity", "create", "acme")
    done = zae("entity", "delete", "acme", "--yes", "-o", "json")
    assert done.code == 0
    assert done.json() == {"entity_id": "acme", "deleted": True}


def test_delete_refuses_with_children_and_unknown(zae: Zae) -> None:
    zae("entity", "create", "acme")
    zae("entity", "create", "k1", "--parent", "acme")
    done = zae("entity", "delete", "acme", "--yes")
    assert done.code == 1
    assert "has 1 children (k1)" in done.stderr
    assert zae("entity", "delete", "ghost", "--yes").code == 1


def test_delete_finishes_a_deletion_that_stopped_after_its_mark(zae: Zae) -> None:
    """A deletion whose process died after its mark on shard 0: the record is gone, the
    buckets remain and can make no shard; `entity delete` finishes it (it used to answer
    that the entity does not exist)."""
    from tests.integration.test_delete_fence import stop_after_the_mark

    zae("entity", "create", "acme")
    limiter = zae.limiter()
    with limiter.acquire("acme", "gpt", {"rpm": 1}, limits=[Limit.per_minute("rpm", 10)]):
        pass
    with pytest.raises(KeyboardInterrupt):
        limiter.repository.run(stop_after_the_mark(limiter._ops.delete_entity("acme")))
    assert zae("entity", "show", "acme").code == 1 and limiter.list_resources("acme")
    done = zae("entity", "delete", "acme", "--yes")
    assert done.code == 0, done.stderr
    assert "deleted entity acme" in done.stdout
    assert limiter.list_resources("acme") == []
    assert zae("entity", "delete", "acme", "--yes").code == 1  # nothing left: unknown


def _shard(shard_id: int, count: int, tokens: int, pressure: float = 10.0) -> ShardInfo:
    return ShardInfo("k1", "gpt-4", shard_id, count, {"rpm": 50}, {"rpm": tokens}, pressure, 0)


def test_shard_report_totals_and_agreement() -> None:
    report = shard_report("gpt-4", [_shard(0, 2, 40), _shard(1, 2, 30)])
    assert report["totals"] == {"rpm": {"capacity": 100, "tokens": 70, "reserved": 0}}
    assert report["shard_counts_agree"] is True
    assert shard_report("gpt-4", [_shard(0, 4, 1), _shard(1, 2, 1)])["shard_counts_agree"] is False


def _stored_shards(zae: Zae, counts: list[int], tokens: list[int]) -> None:
    """Real bucket items for k1/gpt-4 (rpm 100/min undivided), one per shard, as written
    by clients that saw these shard counts (a doubling not yet propagated)."""
    limiter = zae.limiter()
    repo = limiter.repository
    now = int(time.time() * 1000)
    for shard_id, (count, held) in enumerate(zip(counts, tokens, strict=True)):
        # 100 a day: what these shards hold does not change while the test reads them
        state = LimitState(capacity_milli=100_000, refill_amount_milli=100_000,
                           refill_period_ms=86_400_000)  # fmt: skip
        state = replace(state, full_at=state.with_tokens(held * 1000, now, count))
        bucket = BucketState("k1", "gpt-4", shard_id, count, 0, {"rpm": state})
        item = keys.new_bucket_item(repo.namespace, bucket, now)
        repo.client.put_item(TableName=repo.table_name, Item=item)


def test_shards_show_table_and_warning(zae: Zae) -> None:
    zae("entity", "create", "k1")
    _stored_shards(zae, counts=[4, 2], tokens=[25, 30])
    done = zae("entity", "shards", "show", "k1", "--resource", "gpt-4")
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    shard0 = next(line for line in lines if re.match(r"^│\s+0\s", line))
    # Shard 0 counts 4 shards; shards 2 and 3 are not made yet, so their shares of
    # 100/4 are still in their donors, shards 0 and 1, whose full-at times they will copy:
    # shard 0 (full) holds 50 of 50; shard 1, 20 short of its 50 at two shards, holds
    # 15 of 25 twice over.
    assert re.search(r"│\s+4\s+│\s+50/50\s+│", shard0)
    assert any(re.search(r"total\s.*80/100", line) for line in lines)
    assert "disagree about the shard count (2, 4)" in done.stderr


def test_shards_show_json(zae: Zae) -> None:
    _stored_shards(zae, counts=[2, 2], tokens=[40, 30])
    body = zae("entity", "shards", "show", "k1", "-r", "gpt-4", "-o", "json").json()
    assert body["entity_id"] == "k1"
    (report,) = body["resources"]
    # 20 of 50 short, at 50 a day: full in about 10 hours
    assert 0.39 * 86_400_000 < report["shards"][1].pop("full_in_ms") <= 0.41 * 86_400_000
    assert report["shards"][1] == {
        "shard_id": 1,
        "shard_count": 2,
        "capacity": {"rpm": 50},
        "tokens": {"rpm": 30},
        "reserved": {},
        "write_pressure_pct": 0.1,  # one write (its creation) in a window of at least 1 s
        "resets_at_ms": {},  # no quota
    }
    assert report["totals"] == {"rpm": {"capacity": 100, "tokens": 70, "reserved": 0}}
    assert report["shard_counts_agree"] is True


def test_shards_show_unknown_entity(zae: Zae) -> None:
    done = zae("entity", "shards", "show", "ghost", "-r", "gpt-4")
    assert done.code == 1
    assert "entity 'ghost' does not exist" in done.stderr


def test_shards_show_reads_real_buckets(zae: Zae) -> None:
    _arrange_limits(zae)  # k1 took 1000 tpm on gpt-4: one shard
    done = zae("entity", "shards", "show", "k1", "-r", "gpt-4", "-o", "json")
    assert done.code == 0, done.stderr
    (report,) = done.json()["resources"]
    assert [s["shard_id"] for s in report["shards"]] == [0]
    assert report["shards"][0]["shard_count"] == 1
    assert report["totals"]["tpm"] == {"capacity": 15_000, "tokens": 14_000, "reserved": 0}
    assert "wcu" not in report["totals"]


def test_shards_show_every_resource(zae: Zae) -> None:
    _arrange_limits(zae)
    body = zae("entity", "shards", "show", "k1", "-o", "json").json()
    assert [r["resource"] for r in body["resources"]] == ["gpt-4"]


def test_json_output_is_parseable_for_every_read(zae: Zae) -> None:
    _arrange_limits(zae)
    for args in (["list"], ["show", "k1"], ["show", "k1", "-r", "gpt-4"]):
        done = zae("entity", *args, "-o", "json")
        assert done.code == 0
        json.loads(done.stdout)


def test_cascade_per_resource_options(zae: Zae) -> None:
    zae("entity", "create", "org")
    done = zae("entity", "create", "k1", "--parent", "org", "--cascade-resource", "gpt-4",
               "--no-cascade-resource", "embed", "-o", "json")  # fmt: skip
    assert done.code == 0, done.stderr
    assert done.json()["cascade_for"] == {"embed": False, "gpt-4": True}
    # update changes the named resources and keeps the other choices
    done = zae("entity", "update", "k1", "--cascade-resource", "embed")
    assert done.code == 0, done.stderr
    assert "cascade per resource" in done.stdout and "embed: yes, gpt-4: yes" in done.stdout
    done = zae("entity", "update", "k1", "--clear-cascade-resources", "-o", "json")
    assert "cascade_for" not in done.json()
    done = zae("entity", "update", "k1", "--cascade-resource", "x", "--no-cascade-resource", "x")
    assert done.code == 2 and "both" in done.stderr


def test_bypass_options(zae: Zae) -> None:
    done = zae("entity", "create", "svc", "--bypass", "-o", "json")
    assert done.code == 0, done.stderr
    assert done.json()["bypass"] is True
    done = zae("entity", "update", "svc", "--no-bypass")
    assert done.code == 0, done.stderr
    assert "bypass" not in done.stdout
    done = zae("entity", "update", "svc", "--bypass")
    assert "yes: acquires take nothing" in done.stdout
