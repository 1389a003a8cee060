"""flows/acquire.py: what an acquire may be asked. A call shape validated once (entity,
resource, the limits passed) is remembered, so a hot key skips the checks of its ids and
limits; what varies per call (the amounts, the limits in force now) is checked on every
call, and a new shape is validated in full."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from zae_limiter import Limit
from zae_limiter.config_cache import ConfigCache
from zae_limiter.errors import ValidationError
from zae_limiter.flows.acquire import ASKED_MAX, validate_acquire
from zae_limiter.flows.context import RepoState

RPM = Limit.per_minute("rpm", 100)
NIGHT = RPM.during("0 22 * * *", "0 6 * * *", Limit.per_minute("rpm", 500))


def _ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)  # type: ignore[arg-type,misc]


def _state() -> RepoState:
    return RepoState(table="t", namespace="ns", config_cache=ConfigCache(60))


def test_a_shape_asked_again_is_answered_as_the_first_time() -> None:
    state = _state()
    first = validate_acquire(state, "k1", "gpt", {"rpm": 2}, [RPM], 0)
    again = validate_acquire(state, "k1", "gpt", {"rpm": 3}, [RPM], 0)
    assert first == (("gpt",), {"rpm": 2000}, (RPM,))
    assert again == (("gpt",), {"rpm": 3000}, (RPM,))
    assert len(state.asked_shapes) == 1
    assert validate_acquire(state, "k1", "gpt", {"rpm": 1}, None, 0)[2] is None


def test_the_amounts_are_checked_on_every_call_of_a_known_shape() -> None:
    state = _state()
    validate_acquire(state, "k1", "gpt", {"rpm": 1}, [RPM], 0)
    with pytest.raises(ValidationError, match="whole number"):
        validate_acquire(state, "k1", "gpt", {"rpm": 1.5}, [RPM], 0)
    with pytest.raises(ValidationError, match="at least one token"):
        validate_acquire(state, "k1", "gpt", {"rpm": 0}, [RPM], 0)


def test_new_limits_for_a_known_key_are_validated() -> None:
    state = _state()
    validate_acquire(state, "k1", "gpt", {"rpm": 1}, [RPM], 0)
    with pytest.raises(ValidationError, match="appears twice"):
        validate_acquire(state, "k1", "gpt", {"rpm": 1}, [RPM, RPM], 0)
    same_list = [RPM]
    validate_acquire(state, "k1", "gpt", {"rpm": 1}, same_list, 0)
    same_list.append(RPM)  # the list a caller keeps, changed in place
    with pytest.raises(ValidationError, match="appears twice"):
        validate_acquire(state, "k1", "gpt", {"rpm": 1}, same_list, 0)
    with pytest.raises(ValidationError, match="must not be empty"):
        validate_acquire(state, "k1", "gpt", {"rpm": 1}, [], 0)


def test_bad_ids_are_refused_whatever_was_asked_before() -> None:
    state = _state()
    validate_acquire(state, "k1", "gpt", {"rpm": 1}, [RPM], 0)
    for entity, resource in (("k#1", "gpt"), ("k1", "g#pt"), (["k1"], "gpt"), ("k1", ["gpt"] * 2)):
        with pytest.raises(ValidationError):
            validate_acquire(state, entity, resource, {"rpm": 1}, [RPM], 0)  # type: ignore[arg-type]


def test_scheduled_limits_are_those_in_force_at_each_call() -> None:
    state = _state()
    day, night = _ms(2027, 1, 5, 12, 0), _ms(2027, 1, 5, 23, 0)
    by_day = validate_acquire(state, "k1", "gpt", {"rpm": 1}, [NIGHT], day)[2]
    by_night = validate_acquire(state, "k1", "gpt", {"rpm": 1}, [NIGHT], night)[2]
    assert by_day is not None and by_day[0].capacity == 100
    assert by_night is not None and by_night[0].capacity == 500


def test_the_remembered_shapes_are_bounded() -> None:
    state = _state()
    for i in range(ASKED_MAX + 5):
        validate_acquire(state, f"k{i}", "gpt", {"rpm": 1}, None, 0)
    assert len(state.asked_shapes) <= ASKED_MAX


def test_errors_are_reported_in_the_order_a_new_shape_is_checked() -> None:
    """The amounts before the limits passed, as before shapes were remembered."""
    with pytest.raises(ValidationError, match="whole number"):
        validate_acquire(_state(), "k1", "gpt", {"rpm": 1.5}, [RPM, RPM], 0)
    with pytest.raises(ValidationError, match="entity_id"):
        validate_acquire(_state(), "", "gpt", {"rpm": 1.5}, [RPM, RPM], 0)
