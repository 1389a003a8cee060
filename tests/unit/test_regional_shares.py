"""Regional shares of a global limit: the pure decisions (zae_limiter.flows.regional).

`run_model` plays three regions against each other with the decisions the share keepers
and takes make, over a model of last-writer-wins replication: each region's own item,
every other region's view of it delivered after a random lag (versions skipped,
deliveries reordered between items), and partitions that hold a region's changes back.
At every step it checks the sum of the parts over the regions' own items, and every
admission against one ideal bucket of the whole limit fed the same admissions.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

import pytest

from zae_limiter.errors import ValidationError
from zae_limiter.flows import regional as core
from zae_limiter.flows.regional_run import RESERVE_LIFE_MS
from zae_limiter.keys import regions as rk
from zae_limiter.limits import Limit

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")


def _apply(image: core.ShareImage, fields: dict[str, int]) -> core.ShareImage:
    given = {a[2:]: v for a, v in fields.items() if a.startswith(rk.ShareAttr.GIVEN_PREFIX)}
    taken = {a[2:]: v for a, v in fields.items() if a.startswith(rk.ShareAttr.TAKEN_PREFIX)}
    return replace(
        image,
        parts=fields[rk.ShareAttr.PARTS_HELD],
        version=fields[rk.ShareAttr.VERSION],
        capacity_milli=fields[rk.ShareAttr.CAPACITY],
        rate_milli=fields[rk.ShareAttr.RATE],
        full_at=fields[rk.ShareAttr.FULL_AT],
        given={**image.given, **given},
        taken={**image.taken, **taken},
    )


@dataclass
class IdealBucket:
    """One bucket of the whole limit in exact fractions, fed every admission anywhere."""

    capacity: Fraction
    rate_per_ms: Fraction
    tokens: Fraction = Fraction(-1)
    at_ms: int = 0

    def admit(self, amount_milli: int, now_ms: int) -> None:
        if self.tokens < 0:
            self.tokens = self.capacity
        self.tokens = min(self.capacity, self.tokens + (now_ms - self.at_ms) * self.rate_per_ms)
        self.at_ms = now_ms
        self.tokens -= amount_milli
        assert self.tokens >= 0, f"admitted past one ideal bucket of the whole limit at {now_ms}"


@dataclass
class Model:
    limit: Limit
    rng: random.Random
    own: dict[str, core.ShareImage] = field(default_factory=dict)
    views: dict[str, dict[str, core.ShareImage]] = field(default_factory=dict)
    wire: list[tuple[int, str, core.ShareImage]] = field(default_factory=list)
    partitioned: set[str] = field(default_factory=set)
    max_lag_ms: int = 1500
    admitted: dict[str, int] = field(default_factory=dict)
    #: region -> (millitokens left, spendable until): one client's reserve per region.
    reserves: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for region in REGIONS:
            fields = core.new_fields(self.limit, REGIONS, region)
            self.own[region] = core.image_of_fields(fields, region)
            self.views[region] = {}
            self.admitted[region] = 0
        for region in REGIONS:
            self.publish(region, 0)

    def publish(self, region: str, now_ms: int) -> None:
        for other in REGIONS:
            if other != region:
                lag = self.rng.randint(0, self.max_lag_ms)  # per change: later ones may overtake
                self.wire.append((now_ms + lag, other, self.own[region]))

    def deliver(self, now_ms: int) -> None:
        kept = []
        for due, dest, image in self.wire:
            cut = dest in self.partitioned or image.region in self.partitioned
            if due > now_ms or cut:
                kept.append((due, dest, image))
                continue
            held = self.views[dest].get(image.region)
            if held is None or held.version <= image.version:  # last writer wins
                self.views[dest][image.region] = image
        self.wire = kept

    def keeper(self, region: str, wanted: dict[str, int], now_ms: int) -> None:
        own = self.own[region]
        images = {**self.views[region], region: own}
        transfer = core.plan_transfer(own, images, wanted, frozenset(REGIONS))
        if transfer is not None:
            self.own[region] = _apply(own, core.reshare_fields(own, transfer, self.limit, now_ms))
            self.publish(region, now_ms)

    def take(
        self, region: str, amount: int, now_ms: int, ideal: IdealBucket, extra: int = 0
    ) -> None:
        left, until = self.reserves.get(region, (0, 0))
        if left >= amount and now_ms < until:  # served from the reserve: no write
            self.reserves[region] = (left - amount, until)
            self.admitted[region] += amount
            ideal.admit(amount, now_ms)
            return
        image = self.own[region]
        plan = core.plan_take(image, amount, now_ms, extra)
        if extra and isinstance(plan, core.Short):
            extra, plan = 0, core.plan_take(image, amount, now_ms)
        if isinstance(plan, core.Short):
            if plan.rolls_milli:
                self.apply(region, core.plan_roll(image, now_ms), image)
            return
        self.apply(region, plan, image)
        if extra:
            self.reserves[region] = (extra, now_ms + RESERVE_LIFE_MS)
        self.admitted[region] += amount
        ideal.admit(amount, now_ms)

    def apply(self, region: str, plan: core.TakePlan, image: core.ShareImage) -> None:
        """What keys.regions' take write does to the item."""
        if plan.window[1] is None:
            full_at = plan.full_at
        else:
            assert image.full_at is not None
            full_at = image.full_at + plan.full_at
        image = replace(image, full_at=full_at)
        roll = plan.held
        if roll is not None and roll.rolls:
            if roll.seen_epoch == roll.epoch:
                image = replace(image, held=image.held + roll.milli)
            else:
                before = image.held if roll.seen_epoch == roll.epoch - 1 else 0
                image = replace(image, held_epoch=roll.epoch, held=roll.milli, held_before=before)
        self.own[region] = image

    def parts_sum(self) -> int:
        return sum(image.parts for image in self.own.values())


def run_model(
    seed: int,
    steps: int = 3000,
    limit: Limit | None = None,
    max_lag_ms: int = 1500,
    reserves: bool = True,
) -> Model:
    rng = random.Random(seed)
    limit = limit or Limit.per_second("rps", 300)
    model = Model(limit, rng, max_lag_ms=max_lag_ms)
    ideal = IdealBucket(Fraction(limit.capacity_milli), Fraction(limit.refill_amount_milli, 1000))
    now = 0
    demand = {r: rng.random() for r in REGIONS}
    for _ in range(steps):
        now += rng.randint(0, 20)
        roll = rng.random()
        if roll < 0.02:
            demand = {r: rng.random() ** 3 for r in REGIONS}  # a shift
        elif roll < 0.03:
            region = rng.choice(REGIONS)
            model.partitioned ^= {region}
        model.deliver(now)
        region = rng.choices(REGIONS, weights=[demand[r] + 0.01 for r in REGIONS])[0]
        if rng.random() < 0.1:
            model.keeper(region, core.targets(REGIONS, demand), now)
        else:
            extra = rng.choice((0, 0, 10_000, 40_000)) if reserves else 0
            model.take(region, rng.choice((1000, 1000, 5000, 20_000)), now, ideal, extra)
        assert model.parts_sum() <= core.PARTS, f"shares sum past the whole at step {_}"
    return model


@pytest.mark.parametrize("seed", range(12))
def test_shares_never_sum_past_the_whole_and_admissions_stay_in_one_bucket(seed: int) -> None:
    model = run_model(seed)
    moved = sum(sum(image.given.values()) for image in model.own.values())
    assert moved > 0, "the model moved no parts: it tests nothing"
    assert sum(model.admitted.values()) > 0


def test_with_a_limit_that_refills_per_minute() -> None:
    run_model(99, limit=Limit.per_minute("rpm", 6000, burst=9000))


def burst_model(seed: int) -> Model:
    """A burst of ten seconds and a short lag: a token created by a raise shows."""
    return run_model(seed, limit=Limit.per_second("rps", 300, burst=3000), max_lag_ms=50)


@pytest.mark.parametrize("seed", range(6))
def test_with_a_long_burst_and_a_short_lag(seed: int) -> None:
    burst_model(seed)


def test_without_reserves() -> None:
    for seed in range(4):
        run_model(seed, reserves=False)


def drained_then_moved(seed: int = 0) -> Model:
    """Every region drained at once, then a transfer from us-east-1 to ap-southeast-1
    (no lag), then every region drained again: the ideal bucket is empty, so anything a
    transfer created would be admitted past it."""
    limit = Limit.per_second("rps", 300)
    model = Model(limit, random.Random(seed), max_lag_ms=0)
    ideal = IdealBucket(Fraction(limit.capacity_milli), Fraction(limit.refill_amount_milli, 1000))
    model.deliver(1000)

    def drain(now_ms: int) -> None:
        for region in REGIONS:
            tokens = model.own[region].tokens(now_ms) // 1000 * 1000
            if tokens > 0:
                model.take(region, tokens, now_ms, ideal)

    drain(1000)
    wanted = {"us-east-1": core.MIN_PARTS, "eu-west-1": 300_000, "ap-southeast-1": 680_000}
    model.keeper("us-east-1", wanted, 1000)
    model.deliver(1000)
    model.keeper("ap-southeast-1", wanted, 1000)
    assert model.own["ap-southeast-1"].parts > core.PARTS // 2, "the transfer did not happen"
    drain(1000)
    drain(1001)
    return model


def test_a_transfer_between_drained_buckets_creates_no_token() -> None:
    drained_then_moved()


def test_held_counts_that_fill_the_room_roll_out_and_the_share_refills() -> None:
    limit = Limit.per_second("rps", 300)
    model = Model(limit, random.Random(3))
    ideal = IdealBucket(Fraction(limit.capacity_milli), Fraction(limit.refill_amount_milli, 1000))
    region = "us-east-1"
    # Reserves taken until the held counts fill the room: nothing more can be taken.
    for i in range(4):
        model.take(region, 1000, 10 + i, ideal, extra=24_000)
        model.reserves.clear()
    assert isinstance(core.plan_take(model.own[region], 80_000, 20), core.Short)
    assert model.own[region].held_total == 96_000
    # Two epochs on, a take that cannot be served rolls the counts out (one write) ...
    later = 10 + 2 * rk.HELD_EPOCH_MS
    short = core.plan_take(model.own[region], 99_000, later)
    assert isinstance(short, core.Short) and short.rolls_milli == 96_000
    assert 0 < short.retry_after_ms <= rk.HELD_EPOCH_MS
    model.take(region, 99_000, later, ideal)
    assert model.own[region].held_total == 0
    # ... and the share refills: a full share again a second after.
    assert model.own[region].tokens(later + 1000) == model.own[region].capacity_milli


def test_parts_are_initial_less_given_plus_taken() -> None:
    model = run_model(7, steps=1500)
    for region, image in model.own.items():
        expected = core.initial_parts(REGIONS, region)
        expected += sum(image.taken.values()) - sum(image.given.values())
        assert image.parts == expected


def test_a_partitioned_region_keeps_its_share_and_gets_nothing() -> None:
    limit = Limit.per_second("rps", 300)
    model = Model(limit, random.Random(1))
    model.deliver(2000)
    model.partitioned = {"ap-southeast-1"}
    before = model.own["ap-southeast-1"].parts
    wanted = {"us-east-1": 20_000, "eu-west-1": 20_000, "ap-southeast-1": 960_000}
    for step in range(50):
        for region in REGIONS:
            model.keeper(region, wanted, 2000 + step * 100)
        model.deliver(2000 + step * 100)
    assert model.own["ap-southeast-1"].parts == before  # what it had, nothing more
    assert model.parts_sum() < core.PARTS  # the rest waits in flight: under-admission only
    model.partitioned = set()
    for step in range(50):
        model.deliver(10_000 + step * 100)
        for region in REGIONS:
            model.keeper(region, wanted, 10_000 + step * 100)
    assert model.own["ap-southeast-1"].parts > 900_000


def test_lowering_a_share_clamps_the_tokens_and_a_raise_brings_none() -> None:
    limit = Limit.per_second("rps", 300)
    own = core.image_of_fields(core.new_fields(limit, REGIONS, "us-east-1"), "us-east-1")
    assert own.tokens(10_000) == own.capacity_milli == 99_999  # a third (rounded down), full
    lower = core.Transfer(own.parts // 2, {"eu-west-1": own.parts - own.parts // 2}, {}, 0, {})
    lowered = _apply(own, core.reshare_fields(own, lower, limit, 10_000))
    assert lowered.tokens(10_000) == lowered.capacity_milli == 49_999
    raise_ = core.Transfer(own.parts * 2, {}, {"eu-west-1": own.parts}, own.parts, {})
    half_empty = replace(own, full_at=own.state().with_tokens(40_000, 10_000))
    raised = _apply(half_empty, core.reshare_fields(half_empty, raise_, limit, 10_000))
    assert raised.tokens(10_000) == 40_000
    assert raised.capacity_milli == 199_999
    assert raised.tokens(10_500) == 40_000 + 99_999  # refills at the raised rate


def test_absorb_takes_in_only_what_the_giver_shows() -> None:
    limit = Limit.per_second("rps", 300)
    images = {r: core.image_of_fields(core.new_fields(limit, REGIONS, r), r) for r in REGIONS}
    images["eu-west-1"] = replace(images["eu-west-1"], given={"us-east-1": 5000})
    own = replace(images["us-east-1"], taken={"eu-west-1": 2000})
    gained, taken = core.absorb(own, images)
    assert (gained, taken["eu-west-1"]) == (3000, 5000)
    assert core.in_flight(images, "us-east-1") == 5000  # its item as seen has taken none


def parts_taken_in_are_held() -> None:
    """A keeper that takes parts in gives none away in the same pass, nor for
    RELEASE_HOLD_MS after it, nor within RELEASE_HOLD_MS of a refusal for want of tokens;
    then its excess goes as before. (Measured without it: a bursty load sent parts back
    and forth, and the shares held summed to 40% of the whole for seconds.)"""
    limit = Limit.per_second("rps", 300)
    images = {r: core.image_of_fields(core.new_fields(limit, REGIONS, r), r) for r in REGIONS}
    images["eu-west-1"] = replace(images["eu-west-1"], given={"us-east-1": 300_000})
    own = images["us-east-1"]
    # A noisy demand says us-east-1 is owed little and ap-southeast-1 much.
    wanted = {"us-east-1": 100_000, "eu-west-1": 333_333, "ap-southeast-1": 566_667}
    everyone = frozenset(REGIONS)
    transfer = core.plan_transfer(own, images, wanted, everyone)
    assert transfer is not None
    assert (transfer.absorbed, transfer.released, transfer.parts) == (300_000, {}, 633_333)
    after = replace(own, parts=transfer.parts, taken=transfer.taken)
    images["us-east-1"] = after
    assert core.plan_transfer(after, images, wanted, everyone, releasing=False) is None
    released = core.plan_transfer(after, images, wanted, everyone)
    assert released is not None and released.released == {"ap-southeast-1": 233_334}
    hold = core.RELEASE_HOLD_MS
    assert not core.may_release(1_000, None, 1_000 + hold - 1)
    assert core.may_release(1_000, None, 1_000 + hold)
    assert not core.may_release(None, 5_000, 5_000 + hold - 1)
    assert not core.may_release(1_000, 5_000, 5_000 + hold - 1)
    assert core.may_release(1_000, 5_000, 5_000 + hold)
    assert core.may_release(None, None, 0)


def test_parts_taken_in_are_not_given_on_at_once() -> None:
    parts_taken_in_are_held()


def test_targets_follow_demand_and_keep_a_floor() -> None:
    wanted = core.targets(REGIONS, {"us-east-1": 8.0, "eu-west-1": 1.0, "ap-southeast-1": 1.0})
    assert sum(wanted.values()) <= core.PARTS
    assert wanted["us-east-1"] > 750_000 and min(wanted.values()) >= core.MIN_PARTS
    assert core.targets(REGIONS, {}) == {r: core.PARTS // 3 for r in REGIONS}


def test_demand_is_a_rate_over_the_window_and_silence_is_noticed() -> None:
    demand = core.Demand()
    fields = core.new_fields(Limit.per_second("r", 10), REGIONS, "eu-west-1")
    base = core.image_of_fields(fields, "eu-west-1")
    for t in range(0, 3001, 250):
        demand.observe(replace(base, demand_milli=t * 50), t)  # 50 milli per ms
    assert demand.rate("eu-west-1", 3000) == pytest.approx(50_000)
    assert "eu-west-1" in demand.reachable(REGIONS, 3000)
    assert "eu-west-1" not in demand.reachable(REGIONS, 3000 + core.SILENT_AFTER_MS)


def demand_after_a_silence_is_measured_afresh() -> None:
    """A region's item silent for SILENT_AFTER_MS (a partition) and then changed carries
    the whole silence's demand in one step: that is not a rate. Measured afresh, the
    keepers do not give it the whole limit when a partition heals (measured before: a
    region serving 360/s released 70% of the whole to the healed one, which gave it back
    4 s later)."""
    demand = core.Demand()
    fields = core.new_fields(Limit.per_second("r", 300), REGIONS, "eu-west-1")
    base = core.image_of_fields(fields, "eu-west-1")
    for t in range(0, 2001, 250):  # 45 a second, as replicated
        demand.observe(replace(base, demand_milli=t * 45), t)
    assert demand.rate("eu-west-1", 2000) == pytest.approx(45_000)
    for t in range(2250, 32_001, 250):  # partitioned: its item stands still here
        demand.observe(replace(base, demand_milli=2000 * 45), t)
    assert "eu-west-1" not in demand.reachable(REGIONS, 32_000)
    healed = replace(base, demand_milli=32_000 * 45)  # 30 s of its demand at once
    demand.observe(healed, 32_250)
    assert demand.rate("eu-west-1", 32_250) == 0.0
    demand.observe(replace(base, demand_milli=32_250 * 45), 32_500)
    assert demand.rate("eu-west-1", 32_500) == pytest.approx(45_000)
    assert "eu-west-1" in demand.reachable(REGIONS, 32_500)


def test_demand_after_a_silence_is_measured_afresh() -> None:
    demand_after_a_silence_is_measured_afresh()


def test_bad_regions_and_quotas_are_refused_clearly() -> None:
    with pytest.raises(ValidationError, match="two or more distinct regions"):
        core.validate_regions(("a", "a"), "a")
    with pytest.raises(ValidationError, match="not one of the limit's regions"):
        core.validate_regions(("a", "b"), "c")
    from datetime import timedelta

    with pytest.raises(ValidationError, match="quota cannot be a global limit"):
        core.validate_global(Limit.quota("q", 10, reset_after=timedelta(hours=1)))


def test_a_changed_whole_limit_is_refused() -> None:
    limit = Limit.per_second("rps", 300)
    image = core.image_of_fields(core.new_fields(limit, REGIONS, "us-east-1"), "us-east-1")
    with pytest.raises(ValidationError, match="changing a global limit"):
        core.check_whole(image, Limit.per_second("rps", 600))


#: For the mutant checks (tests/mutants/test_regional_mutants.py).
def broken_seeds(check: Callable[[int], object], seeds: range = range(12)) -> None:
    for seed in seeds:
        check(seed)
