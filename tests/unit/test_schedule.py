"""schedule.py: which numbers are in force at a given time, when they took over, and
what the next change is. Pure: times are passed in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from zae_limiter import Limit
from zae_limiter.errors import ValidationError
from zae_limiter.limits import active, in_force, next_change
from zae_limiter.schedule import MAX_OVERRIDES


def _ms(*args: int, tz: object = UTC) -> int:
    return int(datetime(*args, tzinfo=tz).timestamp() * 1000)  # type: ignore[arg-type,misc]


BASE = Limit.per_minute("rpm", 100)
NIGHT = BASE.during("0 22 * * *", "0 6 * * *", Limit.per_minute("rpm", 500))


def test_the_override_holds_from_its_start_to_its_end_and_says_when_it_took_over() -> None:
    assert active(NIGHT, _ms(2027, 1, 5, 21, 59, 59)) == BASE
    night = active(NIGHT, _ms(2027, 1, 5, 22, 0))
    assert night == Limit.per_minute("rpm", 500) and night.since_ms == _ms(2027, 1, 5, 22, 0)
    assert active(NIGHT, _ms(2027, 1, 6, 5, 59, 59)).capacity == 500
    day = active(NIGHT, _ms(2027, 1, 6, 6, 0))
    assert day == BASE and day.since_ms == _ms(2027, 1, 6, 6, 0)
    assert in_force((BASE,), 0) == (BASE,)  # nothing scheduled: the same tuple


def test_next_change_says_when_and_to_what() -> None:
    assert next_change(BASE, 0) is None
    assert next_change(NIGHT, _ms(2027, 1, 5, 12, 0)) == (
        _ms(2027, 1, 5, 22, 0),
        Limit.per_minute("rpm", 500),
    )
    assert next_change(NIGHT, _ms(2027, 1, 5, 23, 0)) == (_ms(2027, 1, 6, 6, 0), BASE)


def test_where_two_overrides_apply_the_later_start_wins() -> None:
    batch = Limit.per_minute("rpm", 900)
    both = NIGHT.during("0 1 * * *", "0 2 * * *", batch)
    assert active(both, _ms(2027, 1, 6, 1, 30)) == batch
    assert active(both, _ms(2027, 1, 6, 2, 30)).capacity == 500  # back to the night's
    assert next_change(both, _ms(2027, 1, 6, 0, 0)) == (_ms(2027, 1, 6, 1, 0), batch)


def test_a_schedule_in_a_time_zone_follows_its_local_clock() -> None:
    from zoneinfo import ZoneInfo

    paris = BASE.during("0 22 * * *", "0 6 * * *", Limit.per_minute("rpm", 500), tz="Europe/Paris")
    at = _ms(2027, 7, 1, 22, 0, tz=ZoneInfo("Europe/Paris"))  # 20:00 UTC in summer
    assert active(paris, at - 1).capacity == 100 and active(paris, at).capacity == 500


def test_bad_schedules_are_refused() -> None:
    other = Limit.per_minute("tpm", 5)
    with pytest.raises(ValidationError, match="same name"):
        BASE.during("0 1 * * *", "0 2 * * *", other)
    with pytest.raises(ValidationError, match="different start and end"):
        BASE.during("0 1 * * *", "0  1 * * *", BASE)
    with pytest.raises(ValidationError, match="not a quota"):
        BASE.during("0 1 * * *", "0 2 * * *", Limit.quota("rpm", 5))
    with pytest.raises(ValidationError, match="a quota cannot be scheduled"):
        Limit("rpm", 5, 0, 0, window=Limit.quota("rpm", 5).window, schedule=NIGHT.schedule)
    many = BASE
    with pytest.raises(ValidationError, match=f"at most {MAX_OVERRIDES}"):
        for hour in range(MAX_OVERRIDES + 1):
            many = many.during(f"0 {hour} * * *", f"30 {hour} * * *", BASE)
