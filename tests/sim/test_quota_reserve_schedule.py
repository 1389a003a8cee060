"""A token reserve held at a quota's reset, as a directed schedule in the simulator
(docs/quotas.md, "Reserves at a reset"): the checker's ideal quota, fed the same
admissions, judges it.

A quota of 100 a minute. Client A (reserves on) acquires 10 times in the last 100 ms of a
window: its bucket is hot, it holds a reserve. The minute turns. A acquires 5 more; B
(reserves off) acquires 100 times; A's keeper gives everything back; C (reserves off)
acquires 20 times. The new window must admit exactly 100: A's 5 are charged to it (its
old reserve is never spent there), the old window's spending is not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tests.sim.sim_mutants import MUTANTS
from zae_limiter import Limit
from zae_limiter.sim.backends import engine_backend
from zae_limiter.sim.run import Backend
from zae_limiter.sim.script import START_MS, Script, client

QUOTA = Limit.quota("rpm", 100, reset="* * * * *")


def reserve_at_the_reset(backend: Callable[[], Backend], table: str = "sim") -> Script:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)
    s = Script(backend, [QUOTA], [client(n, reserve=n == "a") for n in "abc"], table)
    s.advance(60_000 - 100 - (s.world.true_ms - START_MS) % 60_000)
    for _ in range(10):
        s.acquire("a", {"rpm": 1})
        s.advance(2)
    s.advance(60_000 - (s.world.true_ms - START_MS) % 60_000)  # the next window
    for _ in range(5):
        s.acquire("a", {"rpm": 1})
    for _ in range(100):
        s.acquire("b", {"rpm": 1})
    s.keeper("a", everything=True)
    for _ in range(20):  # C: B knows the bucket spent until the reset, C knows nothing
        s.acquire("c", {"rpm": 1})
    return s


def test_a_reserve_held_at_the_reset_admits_no_more_than_the_quota() -> None:
    s = reserve_at_the_reset(engine_backend)
    assert s.clients["a"].state.reserves.stats.takes > 0, "A held a reserve"
    assert s.admitted("rpm") == 110, "10 in the old window, exactly 100 in the new one"
    assert not s.checker.violations, s.checker.violations


def test_the_schedule_catches_a_reserve_that_survives_a_reset() -> None:
    with MUTANTS["reserve-survives-a-reset"]():
        s = reserve_at_the_reset(engine_backend)
    assert any(v.kind == "over-admission" for v in s.checker.violations), s.admitted("rpm")
