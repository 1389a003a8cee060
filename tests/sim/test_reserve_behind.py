"""The checker's "as much again stays behind" (docs/reserves.md, "The guarantee"): a write
that raised a held count (a reserve granted) must leave at least as much in its shard, by
the clock it was planned with. The write's bound keeps it so from any image; a bound that
keeps nothing behind lets a grant sized from a stale image through with less.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.sim.sim_mutants import FIRST_FAILING, MUTANTS
from zae_limiter import Limit, keys
from zae_limiter.flows import Call
from zae_limiter.sim import reserve_judge
from zae_limiter.sim.backends import engine_backend
from zae_limiter.sim.checker import Checker
from zae_limiter.sim.run import run_schedule
from zae_limiter.sim.script import START_MS, Script, client
from zae_limiter.sim.spec import YEAR_S

LIMIT = Limit.custom("rpm", 100, 1, YEAR_S)
KIND = "reserve without as much again behind"


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)


def test_a_grant_is_judged_against_what_it_left() -> None:
    checker = Checker((LIMIT,), "ns", START_MS, 0)
    checker.kept_behind("e1", 0, "rpm", 5000, 5000)  # exactly as much again: kept
    assert not checker.violations
    checker.kept_behind("e1", 0, "rpm", 5000, 4999)
    assert [v.kind for v in checker.violations] == [KIND]


def _granting(amount: int, epoch: int) -> Call:
    """A write's request as far as the judgement reads it: one held count raised."""
    attr = keys.reserve_attr("rpm", epoch)
    return Call(
        "update_item",
        {
            "ExpressionAttributeNames": {"#reserve0": attr},
            "ExpressionAttributeValues": {":reserve0": {"N": str(amount)}},
        },
    )


def _hot() -> tuple[Script, str, Any]:
    """A reserve holder that took reserves from a bucket of 100 (one shard)."""
    s = Script(engine_backend, [LIMIT], [client("a", reserve=True)])
    for _ in range(20):
        s.acquire("a", {"rpm": 1})
        s.advance(2)
    assert not s.checker.violations
    pk = keys.bucket_pk(s.checker.namespace, "e1", "api", 0)
    return s, pk, s.world.peek(pk)


def test_a_grant_that_left_less_behind_fails() -> None:
    s, pk, item = _hot()
    now = s.world.true_ms
    left = keys.decode_bucket(item)
    assert left.reserved, "the client took no reserve"
    epoch = keys.reserve_epoch(now)
    reserve_judge.behind(s.world, pk, _granting(50_000, epoch), item, item, now)
    assert not s.checker.violations  # about 70 left: as much again and more
    reserve_judge.behind(s.world, pk, _granting(90_000, epoch), item, item, now)
    assert [v.kind for v in s.checker.violations] == [KIND]


def test_a_doubling_riding_on_the_grant_counts_the_shares_it_split_off() -> None:
    """A write that also raised the shard's count from 1 to 2 left half its tokens in the
    share not split off yet (its snapshot): together they are what stays behind."""
    s, pk, item = _hot()
    now = s.world.true_ms
    doubled = dict(item)
    doubled[keys.A_SHARD_COUNT] = {"N": "2"}
    snapshot = keys.limit_attr("rpm", "sf")
    doubled[snapshot] = item[keys.limit_attr("rpm", "fa")]
    grant = _granting(50_000, keys.reserve_epoch(now))
    reserve_judge.behind(s.world, pk, grant, item, doubled, now)
    assert not s.checker.violations
    # Judged at the new count alone, it would fail:
    reserve_judge.behind(s.world, pk, grant, None, doubled, now)
    assert [v.kind for v in s.checker.violations] == [KIND]


def test_the_simulator_finds_a_bound_that_keeps_nothing_behind() -> None:
    seed = FIRST_FAILING["bound-keeps-nothing-behind"]
    assert not run_schedule(seed, engine_backend).failed
    with MUTANTS["bound-keeps-nothing-behind"]():
        outcome = run_schedule(seed, engine_backend)
    assert [v.kind for v in outcome.violations] == [KIND]
