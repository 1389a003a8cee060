"""The one backoff (flows/backoff.py), and flows drawing from the state's generator, so a
run replays from a seed; no flow draws from the `random` module's own generator."""

from __future__ import annotations

import random
import re
from pathlib import Path

import zae_limiter.flows
from zae_limiter import Limit
from zae_limiter.config_cache import ConfigCache
from zae_limiter.flows.backoff import backoff_ms
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling import any_shard, throttled
from zae_limiter.flows.write.levels import Level
from zae_limiter.flows.write.take import NOT_FETCHED
from zae_limiter.repository import _state as repository_state


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


def test_a_repositorys_generators_are_seeded_by_its_maker() -> None:
    """A repository's generators (shard choices; waits, its reserve book's too): the same
    seed replays the same draws, and none is the `random` module's (which anything in the
    process may draw from or seed)."""
    state = repository_state("t", None, 60, 1000, 256, True, seed="run-7/client-a")
    assert state.reserves is not None and state.reserves.pacer.rng is state.jitter
    again = repository_state("t", None, 60, 1000, 256, False, seed="run-7/client-a")
    for mine, theirs in ((state.rng, again.rng), (state.jitter, again.jitter)):
        assert [mine.random() for _ in range(5)] == [theirs.random() for _ in range(5)]
    module = getattr(random, "_inst")  # noqa: B009 - the module's generator
    assert repository_state("t", None, 60, 1000, 256, False).rng is not module
    assert _state().rng is not module


def test_a_throttles_jitter_comes_from_the_state() -> None:
    """The gate a throttle closes lasts a jittered backoff drawn from the state's jitter:
    two states seeded alike close it alike, whatever the `random` module is seeded with."""
    level = Level("e", "r", (Limit.per_second("rps", 10),), {"rps": 1000})

    def gate(seed: int) -> int:
        state = _state()
        state.jitter = random.Random(seed)
        state.entities.learn("e", False, None)
        random.seed()  # the module's generator, from the OS: the gate must not follow it
        throttled.note_throttle(state, level, 1000)
        for _ in range(3):
            throttled.note_throttle(state, level, throttled.gate_until(state, level))
        return throttled.gate_until(state, level)

    gates = [gate(s) for s in range(20)]
    assert gates == [gate(s) for s in range(20)] and len(set(gates)) > 1


#: A use of the `random` module's own functions or generator (`random.choice`, `random.seed`,
#: `from random import ...`); `random.Random`, a generator a state owns, is what flows use.
MODULE_RANDOM = re.compile(r"\brandom\.(?!Random\b)\w+|^\s*from\s+random\s+import\b", re.M)


def test_no_flow_draws_from_the_random_module() -> None:
    root = Path(zae_limiter.flows.__file__).parent
    found = [
        f"{path.relative_to(root)}:{text[: m.start()].count(chr(10)) + 1}: {m.group(0)}"
        for path in sorted(root.rglob("*.py"))
        for text in [path.read_text()]
        for m in MODULE_RANDOM.finditer(text)
    ]
    assert found == [], "flows draw from `random` itself; use the state's rng:\n" + "\n".join(found)


def test_the_lint_sees_a_module_draw() -> None:
    bad = "shard = random.randrange(count)\nfrom random import choice\nrng: random.Random\n"
    assert [m.group(0).strip() for m in MODULE_RANDOM.finditer(bad)] == [
        "random.randrange",
        "from random import",
    ]
