"""Mutants for the operator controls' guarantees (docs/controls.md, docs/guarantees.md):

- a top-up that gives every shard what it lacks, up to the whole amount, instead of
  splitting the amount over them (a k-shard bucket gets up to k times the grant);
- a reset whose writes no longer require each shard to be as read (an acquire that lands
  in between is overwritten unseen, and the audit event's "before" is not what the reset
  replaced).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.conftest import Api, Clock
from tests.integration import test_controls as controls_tests
from tests.mutants import must_fail, mutant, mutant_wrapping
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
        # Only the shard count stays required: the values read (":o...") go.
        body["ConditionExpression"] = "#sc = :sc"
        values = body["ExpressionAttributeValues"]
        body["ExpressionAttributeValues"] = {
            k: v for k, v in values.items() if not re.match(r":o", k)
        }
        return part

    return broken


def test_the_in_between_test_catches_a_reset_that_does_not_check_what_it_read(
    table_name: str, clock: Clock
) -> None:
    with mutant_wrapping(controls, "reset_write", _unconditional):
        must_fail(controls_tests.reset_with_an_acquire_in_between, table_name, clock)
