"""Global limits declared like any other (docs/global.md, "Declaring a global limit"):
the acquire takes them from this region's share, and a process's reserves of a share
are each spent within their own life. Each mutant breaks one; the test named beside it
must fail."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from tests.conftest import Api
from tests.engine import test_regional_change_contention as contention
from tests.integration import test_global_cascade as cascade
from tests.integration import test_global_limits as routing
from tests.integration import test_migration_v0006 as v0006
from tests.integration import test_regional_change as change
from tests.mutants import must_fail, mutant
from tests.unit import test_aggregator_share_items as share_items
from tests.unit import test_regional_reserves as reserves
from zae_limiter import lease as lease_module
from zae_limiter.aggregator import records as records_module
from zae_limiter.flows import acquire as acquire_module
from zae_limiter.flows import regional as core_regional
from zae_limiter.flows import regional_change, regional_limits, regional_run
from zae_limiter.flows.records import config


def _skipped(*_args: Any) -> Any:
    """take_global that takes nothing: the global limits are dropped from the acquire."""
    return None
    yield  # a flow


def test_routing_catches_a_global_limit_dropped(api: Api) -> None:
    with mutant(acquire_module, "take_global", _skipped):
        must_fail(lambda: routing.test_a_global_resource_default_rejects_past_the_share(api))


def _hold_joining(self: Any, milli: int, now_ms: int) -> None:
    """One pool: a new reserve joins the live one and gives it its own (later) end."""
    if milli > 0:
        left = sum(m for m, _ in self.reserves)
        self.reserves = deque([(left + milli, now_ms + regional_run.RESERVE_LIFE_MS)])


def test_the_life_test_catches_a_reserve_kept_past_its_life() -> None:
    with mutant(regional_run.Memory, "hold", _hold_joining):
        must_fail(reserves.test_every_reserved_token_is_spent_within_its_own_life)


def _kinds_but_global(limits: Any) -> list[str]:
    """The schema check that forgets global limits: stored below schema 6, where a
    client that predates them is let in and enforces the whole limit in each region."""
    return [k for k in _KINDS(limits) if k != "global"]


_KINDS = config._kinds_needing_schema


def test_the_schema_test_catches_a_global_limit_stored_below_schema_6(api: Api) -> None:
    with mutant(config, "_kinds_needing_schema", _kinds_but_global):
        must_fail(lambda: v0006.test_a_global_limit_is_refused_below_schema_6_at_every_level(api))


def _no_changes(*_args: Any) -> list[Any]:
    """A lease's end that leaves the shares alone: a rollback keeps what it took, an
    adjustment is not charged (tokens lost, or created)."""
    return []


def test_the_lease_test_catches_a_lease_end_that_skips_the_share(api: Api, clock: Any) -> None:
    with mutant(lease_module, "lease_changes", _no_changes):
        must_fail(
            lambda: change.test_rollbacks_and_adjustments_neither_create_nor_lose_tokens(
                api, clock, 1
            )
        )


def _plan_backwards(image: Any, delta_milli: int, now_ms: int) -> Any:
    """A change planned with the wrong sign: a give-back charged, a charge given back."""
    return _PLAN(image, -delta_milli, now_ms)


_PLAN = regional_change.plan_change


def test_the_lease_test_catches_a_change_with_the_wrong_sign(api: Api, clock: Any) -> None:
    with mutant(regional_change, "plan_change", _plan_backwards):
        must_fail(
            lambda: change.test_a_rollback_gives_back_to_the_share_and_an_adjustment_takes_more(
                api, clock
            )
        )


def _take_global_keeping(book: Any, table: str, ns: str, wanted: Any, now_ms: int) -> Any:
    """take_global that keeps what the earlier global limits took when a later one refuses."""
    with mutant(regional_limits, "change_global", _nothing):
        return (yield from _TAKE(book, table, ns, wanted, now_ms))


def _nothing(*_args: Any) -> Any:
    return None
    yield  # a flow


_TAKE = regional_limits.take_global


def test_the_refusal_test_catches_global_limits_kept_when_a_later_one_refuses(api: Api) -> None:
    with mutant(acquire_module, "take_global", _take_global_keeping):
        must_fail(
            lambda: change.test_a_refused_global_limit_gives_back_the_global_ones_taken_before_it(
                api
            )
        )


_SPLIT = regional_limits.split_global


def _split_own_only(state: Any, levels: Any, entity_id: str) -> Any:
    """The split before parents' global limits were taken: only the entity's own."""
    kept, wanted = _SPLIT(state, levels, entity_id)
    return kept, [w for w in wanted if w[0] == entity_id]


def _never_learns(*_args: Any) -> Any:
    """An all-global child that never reads its record: it never learns its parent."""
    return False
    yield  # a flow


@pytest.mark.parametrize(
    ("name", "broken", "body"),
    [
        (
            "split_global",
            _split_own_only,
            "test_a_stored_global_limit_of_the_parent_is_taken_from_its_share",
        ),
        (
            "split_global",
            _split_own_only,
            "test_a_parent_learned_from_the_childs_write_has_its_global_limits_taken",
        ),
        (
            "learn_entity",
            _never_learns,
            "test_a_child_whose_limits_are_all_global_reads_its_record",
        ),
    ],
)
def test_the_cascade_tests_catch_a_parents_global_limit_left_untaken(
    api: Api, name: str, broken: Any, body: str
) -> None:
    test = getattr(cascade, body)
    args = (api, "another client") if "stored" in body else (api,)
    with mutant(acquire_module, name, broken):
        must_fail(lambda: test(*args))


def test_the_usage_test_catches_share_items_left_uncounted() -> None:
    """The aggregator as it was: a share item is not a bucket, so it is skipped."""
    with mutant(records_module, "_share_change", lambda *_args: None):
        must_fail(share_items.test_share_items_count_as_the_entitys_usage_fenced_per_item)


def _give_back_set(image: Any, delta_milli: int, now_ms: int) -> Any:
    """A give-back written as the full-at time this client computed (SET) rather than an
    ADD: under contention it overwrites the takes that landed since its image."""
    if delta_milli >= 0:
        return _PLAN(image, delta_milli, now_ms)
    stale = (image.full_at or 0) + delta_milli * image.period_ms
    return core_regional.TakePlan(stale, (regional_change.ANY, None))


@pytest.mark.engine
@pytest.mark.slow
def test_the_contention_test_catches_a_give_back_that_overwrites(dynamodb_local: Any) -> None:
    with mutant(regional_change, "plan_change", _give_back_set):
        must_fail(contention.test_concurrent_leases_neither_create_nor_lose_share_tokens,
                  dynamodb_local)  # fmt: skip
