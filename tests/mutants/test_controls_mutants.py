"""Mutants for the operator controls' guarantees (docs/controls.md, docs/guarantees.md):

- a top-up that gives every shard what it lacks, up to the whole amount, instead of
  splitting the amount over them (a k-shard bucket gets up to k times the grant);
- a resolution that reads an entity's record only once (another client's update of its
  bypass, cascade or parent is never seen);
- a reset whose writes no longer require each shard to be as read (an acquire that lands
  in between is overwritten unseen, and the audit event's "before" is not what the reset
  replaced).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from tests.conftest import Api, Clock
from tests.integration import test_controls as controls_tests
from tests.mutants import must_fail, mutant, mutant_wrapping
from zae_limiter import RateLimitExceeded
from zae_limiter.flows.offpath import controls
from zae_limiter.models import BucketState


def _every_shard_the_whole(
    buckets: Sequence[BucketState], wanted: Mapping[str, int], now_ms: int
) -> list[dict[str, int]]:
    plan: list[dict[str, int]] = []
    for bucket in buckets:
        plan.append(
            {
                name: min(milli, bucket.user_limits[name].deficit(now_ms, bucket.shard_count))
                for name, milli in wanted.items()
            }
        )
    return plan


def test_the_shard_test_catches_a_top_up_given_to_every_shard(api: Api, clock: Clock) -> None:
    with mutant(controls, "split_grant", _every_shard_the_whole):
        must_fail(controls_tests.test_controls_on_every_shard_of_a_doubled_bucket, api, clock)


def _unconditional(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    def broken(*args: Any) -> dict[str, Any]:
        part = original(*args)
        body = part["Update"]
        # Only the shard count stays required: the values read (":was_...") go.
        body["ConditionExpression"] = "#shards = :shards"
        values = body["ExpressionAttributeValues"]
        body["ExpressionAttributeValues"] = {
            k: v for k, v in values.items() if not re.match(r":was_", k)
        }
        return part

    return broken


def test_the_in_between_test_catches_a_reset_that_does_not_check_what_it_read(
    table_name: str, clock: Clock
) -> None:
    with mutant_wrapping(controls, "reset_write", _unconditional):
        must_fail(controls_tests.reset_with_an_acquire_in_between, table_name, clock)


def test_the_move_test_catches_a_client_that_never_follows_a_move(api: Api) -> None:
    """Mutant: a client that knew the entity keeps cascading to its old parent after
    set_parent (what shard 0 shows it is ignored)."""
    from tests.integration import test_set_parent as set_parent_tests
    from zae_limiter.flows.write import memory

    with mutant(memory, "follow_move", lambda *args: None):
        must_fail(set_parent_tests.test_cascade_follows_the_move_for_every_client, api)


def test_the_soft_limit_tests_catch_a_soft_limit_that_rejects(api: Api, clock: Clock) -> None:
    """Mutant: every limit enforces, soft or not."""
    from tests.integration import test_soft_limits as soft_tests
    from zae_limiter import RateLimitExceeded
    from zae_limiter.flows.write import plan

    rejects = (RateLimitExceeded,)
    with mutant(plan, "enforces", lambda limit: True):
        must_fail(soft_tests.test_a_soft_limit_alone_never_rejects_and_counts_what_it_would_have,
                  api, also=rejects)  # fmt: skip
        must_fail(soft_tests.test_only_the_hard_limit_rejects_next_to_a_soft_one, api,
                  clock, also=rejects)  # fmt: skip


@pytest.mark.engine
def test_the_several_resources_test_catches_a_resource_taken_without_its_condition(
    dynamodb_local: Any,
) -> None:
    """Mutant: in an acquire of several resources, the shared budget's write carries no
    condition (its take can never fail), so only the model's condition decides."""
    from dataclasses import replace

    from tests.engine import test_several_resources_exactness as several
    from zae_limiter.flows import acquire as acquire_flow

    def unconditional(original: Callable[..., Any]) -> Callable[..., Any]:
        def broken(state: Any, entity_id: str, resource: str, limits: Any, amounts: Any) -> Any:
            if resource == several.SHARED:
                limits = tuple(replace(limit, soft=True) for limit in limits)
            return original(state, entity_id, resource, limits, amounts)

        return broken

    def body() -> None:
        several.check_within(*several.run_two_resources(dynamodb_local.url, *several.STILL))

    with mutant_wrapping(acquire_flow, "_level", unconditional):
        must_fail(body)


def test_the_update_test_catches_a_record_read_only_once(api: Api, clock: Clock) -> None:
    """A client that reads an entity's record only the first time never sees another
    client's bypass (or cascade, or parent) change until it restarts."""
    from tests.integration import test_bypass
    from zae_limiter.flows.records import config

    def only_once(state: Any, entity_id: str, own_limits_missed: bool) -> bool:
        return entity_id not in state.entities

    with mutant(config, "reads_record", only_once):
        must_fail(
            test_bypass.test_a_client_that_knew_the_entity_sees_another_clients_update_within_the_cache_ttl,
            api,
            clock,
            also=(RateLimitExceeded,),  # still limited after the bypass: the test's failure
        )
