"""Issue 35's first case, as a directed schedule (docs/reserves.md, "A write planned from
an old image names every epoch since"): in the simulator, and on DynamoDB Local.

A limit of 1,000 that does not refill. Clients A, B and C (reserves on) drain the bucket
to about 400, fast, and give their reserves back (as `return_reserves()` does). Client D
(reserves off) acquires 1: its image of the bucket shows about 389 left and nothing held.
A, B and C go on while their demand is high: the first write of each takes 10 and a reserve
of up to 100 (the full-at time moves by the 10 only), the next acquires are served from
the reserve, and the three processes die before reporting what they spent. 45 s later
their held counts have expired and count as spent. D then acquires 300, speculatively,
from its old image: before the fix its condition named only the two live epochs, its
image's bound held, and more than 1,000 were admitted of 1,000.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tests.sim.sim_mutants import MUTANTS
from zae_limiter import Limit
from zae_limiter.sim.backends import engine_backend
from zae_limiter.sim.run import Backend
from zae_limiter.sim.script import Script, client
from zae_limiter.sim.spec import YEAR_S

LIMIT = Limit.custom("rpm", 1000, 1, YEAR_S)


def stale_image(backend: Callable[[], Backend], table: str = "sim") -> Script:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)
    fleet = ("a", "b", "c")
    clients = [*(client(name, reserve=True) for name in fleet), client("d", reserve=False)]
    s = Script(backend, [LIMIT], clients, table)
    for _ in range(20):  # the fleet drains to 400, fast: its demand is high
        for name in fleet:
            s.acquire(name, {"rpm": 10})
            s.advance(2)
    for name in fleet:
        s.keeper(name, everything=True)  # every reserve goes back
    s.acquire("d", {"rpm": 1})  # D's image: 399 left, nothing held
    for name in fleet:  # on: one write (10 and a reserve), then from memory
        for _ in range(8):
            s.acquire(name, {"rpm": 10})
            s.advance(2)
        s.crash(name)
    s.advance(45_000)  # the held counts expire: spent
    s.acquire("d", {"rpm": 300})
    return s


def test_a_stale_image_admits_no_more_than_the_limit() -> None:
    s = stale_image(engine_backend)
    assert s.admitted("rpm") <= 1000
    assert not s.checker.violations, s.checker.violations


def test_the_stale_image_test_catches_the_fix_reverted() -> None:
    with MUTANTS["stale-image-fix-reverted"]():
        s = stale_image(engine_backend)
    assert s.admitted("rpm") > 1000
    assert any(v.kind == "over-admission" for v in s.checker.violations)
