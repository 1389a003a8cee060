"""A shard split off a donor whose write is throttled (flows/scaling/split.py `_split_off`):
the donor is not written, so the new shard starts empty; a session quota's empty in the
session its donor holds, ending with it (simulator seed 195, the sessions focus), on
canned results. tests/mutants/test_session_split_mutant.py reverts it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from tests.unit._flowkit import make_level, make_state
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows.scaling import split
from zae_limiter.flows.write.shares import stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

SESSION = Limit.quota("session", 40, reset_after=timedelta(minutes=1))
RPM = Limit.per_minute("rpm", 100)
LIMITS = (SESSION, RPM)
T0 = 1_800_000_000_000
LENGTH = 60_000


def _donor(start: int, used_milli: int) -> BucketState:
    """Shard 1 of 2, in the session begun at `start`, `used_milli` of its share spent."""
    cfg = stored_config(SESSION)
    full_at = start * cfg.refill_amount_milli + used_milli * 2
    return BucketState(
        entity_id="e1",
        resource="gpt",
        shard_id=1,
        shard_count=2,
        last_refill_ms=0,
        limits={"session": replace(cfg, full_at=full_at), "rpm": stored_config(RPM)},
    )


def _split_throttled(donor: BucketState, now_ms: int) -> dict[str, Any]:
    level = replace(make_level({"session": 1000}, LIMITS, 4), shard_id=3)
    flow = split._split_off(make_state(), level, donor, 1, 4, now_ms)
    request = next(flow)
    assert request.op == "update_item", "the donor is told the new count first"
    try:
        flow.throw(RateLimiterUnavailable("throttled", code="ThrottlingException"))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise AssertionError("the split went on after its donor's throttle")


def test_a_session_quotas_empty_shard_is_in_its_donors_session() -> None:
    now = T0 + 20_000
    full_at = _split_throttled(_donor(T0, 3000), now)
    made = replace(stored_config(SESSION), full_at=full_at["session"])
    assert made.tokens(now, 4) == 0, "empty: its donor, unwritten, keeps its share"
    assert made.reset_at(now) == T0 + LENGTH, "whole again when its donor's session ends"


def test_with_no_session_open_it_is_empty_from_now() -> None:
    now = T0 + LENGTH + 5_000  # the donor's session ended
    full_at = _split_throttled(_donor(T0, 3000), now)
    made = replace(stored_config(SESSION), full_at=full_at["session"])
    assert made.tokens(now, 4) == 0 and made.reset_at(now) == now + LENGTH
