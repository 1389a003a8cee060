"""Mutants for bucket expiry (docs/quotas.md, Idle buckets expire): each breaks one rule
of the `ttl` a write gives its item (flows/write/plan.py) and shows the guarantee's own test
(tests/integration/test_bucket_expiry.py) fails on it.

- a `ttl` that does not wait for the bucket to refill (only for reserves and the idle
  period): deleted with tokens spent, the bucket comes back full and over-admits;
- a quota's `ttl` computed as for a refilling limit (its window ignored): the bucket
  expires while its window holds spent tokens, which is a reset;
- a sharded bucket given a `ttl` like a one-shard one.
"""

from __future__ import annotations

from typing import Any

from tests.conftest import Api, Clock
from tests.integration import test_bucket_expiry as expiry
from tests.mutants import must_fail, mutant
from zae_limiter.flows.write import plan as expiry_flows
from zae_limiter.limits import Limit

ORIGINAL_FULL_AGAIN = expiry_flows.full_again_ms
ORIGINAL_EXPIRES_AT = expiry_flows.expires_at_s


def test_simulated_expiry_catches_a_ttl_that_does_not_wait_for_the_refill(
    api: Api, clock: Clock
) -> None:
    with mutant(expiry_flows, "full_again_ms", lambda limit, now_ms, debt_milli=0: now_ms):
        must_fail(
            expiry.test_a_simulated_expiry_admits_exactly_what_an_ideal_bucket_admits, api, clock
        )


def _window_ignored(limit: Limit, now_ms: int, debt_milli: int = 0) -> int:
    if limit.window is None:
        return ORIGINAL_FULL_AGAIN(limit, now_ms, debt_milli)
    return now_ms + 1  # a quota's stored numbers refill a whole capacity in 1 ms


def test_quota_test_catches_a_quota_bucket_that_expires_inside_its_window(
    api: Api, clock: Clock
) -> None:
    with mutant(expiry_flows, "full_again_ms", _window_ignored):
        must_fail(
            expiry.test_a_quota_bucket_does_not_expire_while_its_window_holds_spent_tokens,
            api,
            clock,
        )


def test_sharded_test_catches_a_sharded_bucket_given_a_ttl(api: Api, clock: Clock) -> None:
    def any_count(limits: Any, shard_count: int, *args: Any, **kwargs: Any) -> int | None:
        return ORIGINAL_EXPIRES_AT(limits, 1, *args, **kwargs)

    from zae_limiter.flows.write import take

    with mutant(take, "expires_at_s", any_count):
        must_fail(expiry.test_a_sharded_bucket_never_expires, api, clock)
