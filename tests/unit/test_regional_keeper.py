"""A share keeper's pass (flows/regional_run.keep_pass) on canned answers: it releases
what demand says is excess, unless one of this process's acquires was refused for want
of tokens while the pass read and froze the item (slow on a loaded engine): the release
was decided on demand from before the refusal, and the share is all used."""

from __future__ import annotations

from typing import Any

from tests.unit._flowkit import answered
from zae_limiter.flows import Call, Result, Sleep
from zae_limiter.flows import regional as core
from zae_limiter.flows.regional_run import Memory, Target, keep_pass, take_share
from zae_limiter.keys import regions as rk
from zae_limiter.limits import Limit

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")
LIMIT = Limit.per_second("rps", 300)
TARGET = Target("t", "ns", "e", "r", LIMIT, REGIONS, "us-east-1")


def _item(region: str, **fields: int) -> dict[str, Any]:
    values = {**core.new_fields(LIMIT, REGIONS, region), **fields}
    key = rk.share_key("ns", "e", "r", "rps", region)
    return {**key, "region": {"S": region}, **{a: {"N": str(v)} for a, v in values.items()}}


def _set(call: Call, attr: str) -> int | None:
    names = call.params["ExpressionAttributeNames"]
    for name, value in names.items():
        if value == attr and name.startswith("#s"):
            return int(call.params["ExpressionAttributeValues"][":" + name[1:]]["N"])
    return None


def _pass(refused_while_freezing: bool) -> tuple[Any, list[Call]]:
    memory = Memory()
    for region in REGIONS:  # every region seen idle two seconds ago
        memory.demand.observe(core.decode(_item(region)), 0)
    own = _item("us-east-1")

    def answer(call: Call) -> Result:
        if call.op == "query":  # ap-southeast-1 now asks for the whole limit
            items = [own, _item("eu-west-1"), _item("ap-southeast-1", dm=600_000)]
            return Result(response={"Items": items})
        if call.params["UpdateExpression"].startswith("SET #v = :n, #z"):  # the freeze
            if refused_while_freezing:
                memory.short_at_ms = 2_100  # an acquire refused while the freeze was out
            return Result(response={"Attributes": {**own, "vr": {"N": "2"}, "fz": {"N": "2000"}}})
        return Result(response={"Attributes": {**own, "vr": {"N": "3"}}})

    done, calls, _ = answered(keep_pass(TARGET, memory, 2_000), answer)
    return done, calls


def test_the_keeper_releases_the_excess_demand_shows() -> None:
    done, calls = _pass(refused_while_freezing=False)
    assert [c.op for c in calls] == ["query", "update_item", "update_item"]
    assert done.transfer is not None
    assert done.transfer.released == {"ap-southeast-1": 323_333}
    assert _set(calls[-1], rk.ShareAttr.PARTS_HELD) == core.MIN_PARTS


def refused_while_freezing_releases_nothing() -> None:
    done, calls = _pass(refused_while_freezing=True)
    # The freeze is undone by the second write, which moves nothing.
    assert [c.op for c in calls] == ["query", "update_item", "update_item"]
    assert done.transfer is None
    assert _set(calls[-1], rk.ShareAttr.PARTS_HELD) == 333_333


def test_a_refusal_during_the_pass_cancels_its_release() -> None:
    refused_while_freezing_releases_nothing()


def _driven(flow: Any, answer: Any, woke_ms: int) -> tuple[Any, list[Call]]:
    """Run a flow whose pauses wake at `woke_ms` (the driver's clock after a wait)."""
    calls: list[Call] = []
    send: Any = None
    try:
        request = next(flow)
        while True:
            if isinstance(request, Sleep):
                send = woke_ms
            else:
                calls.append(request)
                send = answer(request)
            request = flow.send(send)
    except StopIteration as done:
        return done.value, calls


def reshared_when_the_frozen_image_came_back() -> None:
    """The keeper's pass starts at 2,000 ms; its Query and freeze come back at 2,900 (a
    loaded engine). The bucket, empty at 2,000 and refilling 100 a second, held 90 at
    2,900: its share lowered to 1% (3 tokens) holds a full 3, not what 0 at 2,000 would
    have refilled by then at the new rate (2.7: the old rate's refill turned into debt)."""
    memory = Memory()
    for region in REGIONS:
        memory.demand.observe(core.decode(_item(region)), 0)
    empty = core.image_of_fields(core.new_fields(LIMIT, REGIONS, "us-east-1"), "us-east-1")
    full_at = empty.state().with_tokens(0, 2_000)
    own = _item("us-east-1", fa=full_at)

    def answer(call: Call) -> Result:
        if call.op == "query":
            items = [own, _item("eu-west-1"), _item("ap-southeast-1", dm=600_000)]
            return Result(response={"Items": items})
        if call.params["UpdateExpression"].startswith("SET #v = :n, #z"):
            return Result(response={"Attributes": {**own, "vr": {"N": "2"}, "fz": {"N": "2000"}}})
        return Result(response={"Attributes": {**own, "vr": {"N": "3"}}})

    done, calls = _driven(keep_pass(TARGET, memory, 2_000), answer, woke_ms=2_900)
    assert done.transfer is not None and done.transfer.parts == core.MIN_PARTS
    cp, ra, rp = core.share_config(LIMIT, core.MIN_PARTS)
    after = core.LimitState(capacity_milli=cp, refill_amount_milli=ra, refill_period_ms=rp)
    written = _set(calls[-1], rk.ShareAttr.FULL_AT)
    assert written is not None
    assert replace_full_at(after, written).tokens(2_900) == cp  # full: 3 tokens


def replace_full_at(state: Any, full_at: int) -> Any:
    return core.LimitState(
        capacity_milli=state.capacity_milli, refill_amount_milli=state.refill_amount_milli,
        refill_period_ms=state.refill_period_ms, full_at=full_at,
    )  # fmt: skip


def test_the_bucket_is_reshared_at_the_time_the_frozen_image_came_back() -> None:
    reshared_when_the_frozen_image_came_back()


def a_roll_refreshes_what_takes_plan_from() -> None:
    """A take that finds the room full of old held counts writes the roll alone and is
    refused; the next take plans from the item the roll answered (counts rolled into the
    full-at time), not from the image before it, and is admitted once the share refilled."""
    epoch = 40_000
    now = (epoch + 2) * rk.HELD_EPOCH_MS + 10  # two epochs on: both counts roll
    held = {"he": epoch, "hc": 60_000, "hp": 40_000}  # 100 tokens: more than the room
    memory = Memory(reserve=False)
    memory.image = core.decode(_item("us-east-1", **held))

    def answer(call: Call) -> Result:
        values = call.params["ExpressionAttributeValues"]
        if values[":a"]["N"] == "0":  # the roll: counts moved into the full-at time
            rolled = {"he": epoch + 2, "hc": 0, "hp": 0, "fa": int(values[":x"]["N"])}
            return Result(response={"Attributes": _item("us-east-1", **rolled)})
        return Result(response={"Attributes": _item("us-east-1", vr=1)})

    first, calls, _ = answered(take_share(TARGET, memory, 1000, now), answer)
    assert not first.admitted and len(calls) == 1  # the roll alone
    later = now + 300  # 30 tokens refilled since the roll charged the 100
    second, calls, _ = answered(take_share(TARGET, memory, 1000, later), answer)
    assert second.admitted and len(calls) == 1


def test_a_roll_refreshes_what_takes_plan_from() -> None:
    a_roll_refreshes_what_takes_plan_from()
