"""The one backoff (flows/backoff.py), and flows drawing from the state's generator, so a
run replays from a seed."""

from __future__ import annotations

import random

from zae_limiter import Limit
from zae_limiter.config_cache import ConfigCache
from zae_limiter.flows.backoff import backoff_ms
from zae_limiter.flows.context import RepoState, shared_rng
from zae_limiter.flows.scaling import any_shard
from zae_limiter.flows.write.levels import Level
from zae_limiter.flows.write.take import NOT_FETCHED


def test_the_bound_doubles_from_the_first_wait_up_to_the_cap() -> None:
    bounds = [backoff_ms(attempt, None, 50, 1000) for attempt in range(1, 8)]
    assert bounds == [50, 100, 200, 400, 800, 1000, 1000]
    assert backoff_ms(0, None, 50, 1000) == 50  # no failure yet counts as the first
    assert backoff_ms(10_000, None, 5, 200) == 200  # the exponent stops, the cap holds


def test_jitter_draws_between_zero_and_the_bound_from_the_given_generator() -> None:
    waits = [backoff_ms(3, random.Random(seed), 50, 5000) for seed in range(300)]
    assert min(waits) >= 0 and max(waits) <= 200 and len(set(waits)) > 50
    assert waits == [backoff_ms(3, random.Random(seed), 50, 5000) for seed in range(300)]


def _state(rng: random.Random | None = None) -> RepoState:
    state = RepoState(table="t", namespace="ns", config_cache=ConfigCache(60))
    if rng is not None:
        state.rng = rng
    return state


def test_the_first_shard_comes_from_the_state_generator() -> None:
    level = Level("e", "r", (Limit.per_second("rps", 10),), {"rps": 1000}, shard_count=8)
    def pick(seed: int) -> int:
        return any_shard._first_shard(_state(random.Random(seed)), level, NOT_FETCHED)[0]

    picks = [pick(s) for s in range(40)]
    again = [pick(s) for s in range(40)]
    assert picks == again and len(set(picks)) > 1
    assert picks == [random.Random(s).randrange(8) for s in range(40)]


def test_by_default_a_state_draws_from_what_random_seed_seeds() -> None:
    # The simulator seeds `random` and replays: the default generator must follow it.
    assert _state().rng is shared_rng() is getattr(random, "_inst")  # noqa: B009
