"""Regional shares (docs/global.md, "Why it cannot over-admit") hold because the giver
lowers first, the receiver raises only by what it has seen released, and a raise brings
no token. Each mutant below breaks one of the three; the model of three regions under lag,
reordering and partitions (tests/unit/test_regional_shares.py) must catch it, and the
engine test on the local multi-region engine must catch the first two.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.conftest import moto_server  # noqa: F401  (a fixture)
from tests.engine.test_regional_shares import global_table  # noqa: F401  (a fixture)
from tests.mutants import must_fail, mutant, mutant_wrapping
from tests.unit.test_regional_keeper import (
    a_roll_refreshes_what_takes_plan_from,
    refused_while_freezing_releases_nothing,
    reshared_when_the_frozen_image_came_back,
)
from tests.unit.test_regional_shares import (
    broken_seeds,
    burst_model,
    demand_after_a_silence_is_measured_afresh,
    drained_then_moved,
    parts_taken_in_are_held,
    run_model,
)
from zae_limiter.flows import Sleep, regional_run
from zae_limiter.flows import regional as core


def _all_seeds() -> None:
    drained_then_moved()
    broken_seeds(run_model)
    broken_seeds(burst_model, range(6))


def _raise_before_release(original: Any) -> Any:
    """The receiver raises by what its target says it is owed, before any release."""

    def broken(own: Any, images: Any, wanted: Any, reachable: Any, **options: Any) -> Any:
        transfer = original(own, images, wanted, reachable, **options)
        owed = wanted[own.region] - own.parts
        if owed > core.HYSTERESIS and (transfer is None or not transfer.released):
            base = transfer or core.Transfer(own.parts, own.given, own.taken, 0, {})
            return core.Transfer(base.parts + owed, base.given, base.taken, owed, {})
        return transfer

    return broken


def _give_without_lowering(original: Any) -> Any:
    """The giver raises `g_receiver` but keeps its parts (it would lower them later)."""

    def broken(own: Any, images: Any, wanted: Any, reachable: Any, **options: Any) -> Any:
        transfer = original(own, images, wanted, reachable, **options)
        if transfer is None or not transfer.released:
            return transfer
        kept = transfer.parts + sum(transfer.released.values())
        return core.Transfer(kept, transfer.given, transfer.taken, transfer.absorbed, {})

    return broken


def _raise_brings_tokens(original: Any) -> Any:
    """A raise credits the raised capacity as tokens (the bucket jumps by the increase)."""

    def broken(own: Any, transfer: Any, limit: Any, now_ms: int) -> Any:
        fields = original(own, transfer, limit, now_ms)
        cp = fields[core.rk.ShareAttr.CAPACITY]
        if cp > own.capacity_milli:
            after = core.LimitState(
                capacity_milli=cp,
                refill_amount_milli=fields[core.rk.ShareAttr.RATE],
                refill_period_ms=fields[core.rk.ShareAttr.PERIOD],
            )
            tokens = own.tokens(now_ms) + cp - own.capacity_milli
            fields[core.rk.ShareAttr.FULL_AT] = after.with_tokens(tokens, now_ms)
        return fields

    return broken


def _full_at_kept(original: Any) -> Any:
    """A share change keeps `fa` as it was, written for the old rate (not re-expressed)."""

    def broken(own: Any, transfer: Any, limit: Any, now_ms: int) -> Any:
        fields = original(own, transfer, limit, now_ms)
        if own.full_at is not None:
            fields[core.rk.ShareAttr.FULL_AT] = own.full_at
        return fields

    return broken


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("plan_transfer", _raise_before_release),
        ("plan_transfer", _give_without_lowering),
        ("reshare_fields", _raise_brings_tokens),
        ("reshare_fields", _full_at_kept),
    ],
    ids=["receiver-raises-first", "giver-does-not-lower", "raise-brings-tokens", "fa-kept"],
)
def test_the_model_catches_each_broken_transfer(name: str, make: Any) -> None:
    _all_seeds()  # passes on the real code
    with mutant_wrapping(core, name, make):
        killed = must_fail(_all_seeds)
    assert "past" in str(killed), killed


def _room_ignores_reserves(original: Any) -> Any:
    """A take plans as if reserves held nothing: the room is the whole share."""

    def broken(image: Any, amount: int, now_ms: int, extra: int = 0) -> Any:
        plan = original(core.replace(image, held=0, held_before=0), amount, now_ms, extra)
        if isinstance(plan, core.TakePlan):  # the held counts still written as they were
            return core.replace(plan, held=image.held_seen(extra, now_ms))
        return plan

    return broken


@pytest.mark.parametrize(
    ("name", "make"),
    [("plan_take", _room_ignores_reserves)],
    ids=["room-ignores-reserves"],
)
def test_the_model_catches_reserves_forgotten(name: str, make: Any) -> None:
    with mutant_wrapping(core, name, make):
        killed = must_fail(_all_seeds)
    assert "past" in str(killed), killed


def test_the_model_catches_a_floor_of_zero_tokens_ignored() -> None:
    """A take that ignores the share (plans as if always full) is caught too."""
    with mutant(core, "plan_take", lambda image, amount, now, extra=0: core.TakePlan(0, (0, None))):
        must_fail(_all_seeds)


def _release_what_just_arrived(original: Any) -> Any:
    """The keeper absorbs and gives away in one pass, whatever it was told (the hold
    after taking parts in, or after a refusal, forgotten)."""

    def broken(own: Any, images: Any, wanted: Any, reachable: Any, **options: Any) -> Any:
        transfer = original(own, images, wanted, reachable)
        if transfer is None or not transfer.absorbed:
            return transfer
        out = core.release(own, transfer.parts, images, wanted, reachable)
        given = dict(transfer.given)
        for region, amount in out.items():
            given[region] = given.get(region, 0) + amount
        parts = transfer.parts - sum(out.values())
        return core.Transfer(parts, given, transfer.taken, transfer.absorbed, out)

    return broken


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("plan_transfer", _release_what_just_arrived),
        ("may_release", lambda original: lambda *args: True),
    ],
    ids=["absorb-and-release-at-once", "no-hold"],
)
def test_the_hold_test_catches_parts_given_on_at_once(name: str, make: Any) -> None:
    parts_taken_in_are_held()  # passes on the real code
    with mutant_wrapping(core, name, make):
        must_fail(parts_taken_in_are_held)


def _observe_keeping_history(original: Any) -> Any:
    """Demand keeps its history across a silence (the healed region's backlog of demand
    read as a rate over the window)."""

    def broken(self: Any, image: Any, now_ms: int) -> None:
        history = self.seen.setdefault(image.region, core.deque(maxlen=64))
        kept = list(history)
        original(self, image, now_ms)
        if len(history) == 1 and kept:
            history.extendleft(reversed(kept))
            while len(history) > 2 and history[1][0] <= now_ms - core.DEMAND_WINDOW_MS:
                history.popleft()

    return broken


def test_the_demand_test_catches_a_silence_read_as_a_rate() -> None:
    demand_after_a_silence_is_measured_afresh()  # passes on the real code
    with mutant_wrapping(core.Demand, "observe", _observe_keeping_history):
        must_fail(demand_after_a_silence_is_measured_afresh)


def test_the_keeper_test_catches_a_refusal_during_the_pass_ignored() -> None:
    refused_while_freezing_releases_nothing()  # passes on the real code
    with mutant(regional_run, "not_refused_since", lambda memory, before: True):
        must_fail(refused_while_freezing_releases_nothing)


def _pause_without_the_time(ms: int) -> Any:
    """The keeper learns no time after its freeze: it re-expresses at the pass's start."""
    yield Sleep(ms)
    return None


def test_the_keeper_test_catches_a_bucket_reshared_at_the_pass_start() -> None:
    reshared_when_the_frozen_image_came_back()  # passes on the real code
    with mutant(regional_run, "pause", _pause_without_the_time):
        must_fail(reshared_when_the_frozen_image_came_back)


def _roll_forgets_its_answer(original: Any) -> Any:
    """The roll's answer is dropped: takes plan again from the image before it."""

    def broken(target: Any, memory: Any, image: Any, now_ms: int) -> Any:
        before = memory.image
        written = yield from original(target, memory, image, now_ms)
        memory.image = before
        return written

    return broken


def test_the_roll_test_catches_takes_planned_from_before_the_roll() -> None:
    a_roll_refreshes_what_takes_plan_from()  # passes on the real code
    with mutant_wrapping(regional_run, "_roll", _roll_forgets_its_answer):
        must_fail(a_roll_refreshes_what_takes_plan_from)


@pytest.mark.engine
def test_the_engine_test_catches_a_giver_that_does_not_lower(
    moto_server: Any,  # noqa: F811  (the fixtures imported above)
    global_table: Any,  # noqa: F811
) -> None:
    """On the local multi-region engine: the counters check of the three regions' own
    items fails when the giver raises `g_receiver` without lowering its parts."""
    from tests.engine import test_regional_shares as engine_test

    with mutant_wrapping(core, "plan_transfer", _give_without_lowering):
        must_fail(engine_test.test_one_global_limit_across_three_regions, moto_server, global_table)
