"""A session quota's shards joining shard 0's session (flows/scaling/sessions.py) and the
take a joining shard plans (flows/write/plan.py): pure, on canned results."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.unit._flowkit import KEY, TABLE, drive, limit_part, make_level, make_state
from zae_limiter import keys
from zae_limiter.flows import Flow, Result
from zae_limiter.flows.scaling import sessions
from zae_limiter.flows.write.levels import Level, WritePlan
from zae_limiter.flows.write.plan import new_bucket, plan_write
from zae_limiter.flows.write.shares import stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

SESSION = Limit.quota("session", 40, reset_after=timedelta(minutes=1))
RPM = Limit.per_minute("rpm", 100)
LIMITS = (SESSION, RPM)
RA = SESSION.refill_amount_milli
T0 = 1_800_000_000_000
LENGTH = 60_000


def _shard(shard_id: int, start: int | None, used_milli: int = 0) -> BucketState:
    """Shard `shard_id` of 4 whose session began at `start` (None: never taken)."""
    full_at = None if start is None else start * RA + used_milli * 4
    return BucketState(
        entity_id="e1",
        resource="gpt",
        shard_id=shard_id,
        shard_count=4,
        last_refill_ms=0,
        limits={"session": replace(stored_config(SESSION), full_at=full_at)},
    )


def _level(shard_id: int) -> Level:
    return replace(make_level({"session": 1000}, LIMITS, 4), shard_id=shard_id)


def _item(bucket: BucketState) -> dict[str, object]:
    return keys.new_bucket_item("ns", bucket, T0)


def _without_requests(flow: Flow[Level | None]) -> Level | None:
    try:
        request = next(flow)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise AssertionError(f"a request was made: {request}")


def test_only_shards_past_zero_with_no_session_open_join() -> None:
    live, ended = _shard(1, T0, 3000), _shard(1, T0 - LENGTH, 3000)
    assert sessions.unjoined(_level(1), live, T0 + 10) == ()
    assert sessions.unjoined(_level(1), ended, T0 + 10) == (SESSION,)
    assert sessions.unjoined(_level(1), _shard(1, None), T0) == (SESSION,)
    # Shard 0 opens sessions itself.
    assert sessions.unjoined(_level(0), _shard(0, None), T0) == ()


def test_shard_zeros_open_session_is_the_one_joined() -> None:
    assert sessions.open_start(_shard(0, T0, 5000), SESSION, T0 + 100) == T0
    assert sessions.open_start(_shard(0, T0, 5000), SESSION, T0 + LENGTH) is None  # ended
    assert sessions.open_start(_shard(0, None), SESSION, T0) is None  # never opened
    # Opened by a clock ahead of this one: not begun here, so not joined from here.
    assert sessions.open_start(_shard(0, T0 + 50, 1000), SESSION, T0) is None


def test_a_joining_take_reads_shard_zero_once_per_session() -> None:
    state = make_state()
    level = _level(2)
    read = Result(response={"Item": _item(_shard(0, T0, 2000))})
    joined, calls = drive(sessions.joined(state, level, (SESSION,), T0 + 500), [read])
    assert joined.joined == {"session": T0}
    assert calls[0].op == "get_item"
    # Remembered: the next shard joins with no read, until the session ends.
    again = _without_requests(sessions.joined(state, level, (SESSION,), T0 + 900))
    assert again is not None and again.joined == {"session": T0}
    _, calls = drive(
        sessions.joined(state, level, (SESSION,), T0 + LENGTH),
        [Result(response={"Item": _item(_shard(0, T0, 2000))})],
    )
    assert len(calls) == 1


def test_no_session_on_shard_zero_sends_the_take_there() -> None:
    state = make_state()
    ended = Result(response={"Item": _item(_shard(0, T0 - LENGTH, 2000))})
    value, _ = drive(sessions.joined(state, _level(1), (SESSION,), T0), [ended])
    assert value is None
    value, _ = drive(sessions.joined(state, _level(1), (SESSION,), T0), [Result()])
    assert value is None  # no shard 0 yet: the take makes it


def test_a_joining_shard_sets_from_the_sessions_start_under_its_own_end() -> None:
    now = T0 + 30_000
    level = replace(_level(3), joined={"session": T0})
    plan = plan_write(_shard(3, T0 - LENGTH, 7000), level, now, TABLE, KEY)
    assert isinstance(plan, WritePlan)
    form, values = limit_part(plan.params, "session")
    assert form == "set"
    assert values["amount"] == T0 * RA + 1000 * 4  # shard 0's start, not `now`
    assert values["now"] == (now - LENGTH + 1) * RA - 1  # only over a session ended by now
    # A shard already in the session adds, as any take inside a window.
    plan = plan_write(_shard(3, T0, 7000), level, now, TABLE, KEY)
    assert isinstance(plan, WritePlan)
    assert limit_part(plan.params, "session")[0] == "add"


def test_a_split_shard_with_nothing_taken_opens_no_session() -> None:
    ended = (T0 - LENGTH) * RA + 5000 * 4
    level = replace(make_level({}, (SESSION,), 4), shard_id=1)
    made = new_bucket(level, T0, 1000, {"session": ended})
    assert made.limits["session"].full_at == ended
    taking = replace(level, consume_milli={"session": 1000})
    assert sessions.unjoined(taking, made, T0) == (SESSION,)
