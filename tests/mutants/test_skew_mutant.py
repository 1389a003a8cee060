"""The clock-skew bound (docs/buckets.md, "Clock skew") holds because a take on a full
bucket SETs the full-at time only under `fa <= now`. Without that condition a client's
stale image says "full" and its SET erases what the other client took since: the skew test
(`tests/engine/test_clock_skew.py`, the order where the client behind drains the bucket
first) must fail, at no skew (a second capacity) and at a small one (more than `d x rate`).
"""

from __future__ import annotations

import re

import pytest

from tests._servers import EngineEndpoint
from tests.engine import test_clock_skew
from tests.mutants import condition_rewritten, must_fail, mutant_wrapping
from zae_limiter.keys import takes as takes_module

pytestmark = pytest.mark.engine

_FULL = re.compile(
    r"\(\(attribute_not_exists\(#full_at_(\d+)\) AND attribute_not_exists\(#tokens_\1\)\)"
    r" OR #full_at_\1 <= :now_\1\)"
)


#: Always true, and still uses the names and values.
_set_without_its_condition = condition_rewritten(
    _FULL, r"(attribute_not_exists(#tokens_\1) OR :now_\1 = :now_\1)"
)


@pytest.mark.parametrize("reserve", [False, True], ids=["no-reserve", "reserve"])
@pytest.mark.parametrize("skew_ms", [0, 300])
def test_a_set_that_overwrites_a_full_bucket_is_caught(
    dynamodb_local: EngineEndpoint, skew_ms: int, reserve: bool
) -> None:
    check = test_clock_skew.test_a_skew_of_d_ms_costs_at_most_d_times_the_rate
    args = (dynamodb_local, skew_ms, reserve, "behind-first")
    check(*args)  # passes on the real code
    with mutant_wrapping(takes_module, "_expression", _set_without_its_condition):
        killed = must_fail(check, *args)
    assert "past the capacity" in str(killed), killed
