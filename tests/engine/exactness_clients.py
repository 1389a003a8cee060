"""Several clients on one bucket, played step by step and judged against the ideal bucket:
the body shared by the exactness property test and the mutants that must fail it.

Each client is its own repository on one table; all share one simulated clock. A plan is
a list of `Step`s. After each step:

- never ahead: every admitted take was there in an ideal bucket fed exactly the admitted
  history (`Replay.violations`);
- as much again stays behind: a step that gave its client a bigger token reserve left at
  least that much in the bucket (read back with `available()`).

`finish` closes every client (returning its reserves) and checks that the table then
reports no more whole tokens than that ideal bucket holds: none were created.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tests.exactness_model import Replay, SimClock
from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.flows.reserves.book import ReserveSettings

RESOURCE = "api"
CLIENTS = 3
KINDS = ("take", "adjust", "rollback", "return-due", "return-all")


class Boom(Exception):
    """Raised inside a lease to roll it back."""


@dataclass(frozen=True, slots=True)
class Step:
    client: int
    kind: str  # one of KINDS
    amount: int
    delta: int  # for "adjust": added to the lease before it ends
    advance_ms: int  # the clock moves this much before the step


#: Reserves that reach their age before they are idle (`max_age_ms` = `idle_ms`), and
#: large ones (a target period of 5 s, up to half the capacity), so that what a renewal
#: gives back is more than the few tokens an exactness check could miss.
AGED_SETTINGS = ReserveSettings(writes_per_second=0.2, max_share=0.5, idle_ms=3000, max_age_ms=3000)
#: With AGED_SETTINGS: client 0 takes a reserve, spends from it, and its acquire past the
#: reserve's age (not idle, not yet due for the keeper) returns it with its own write (a
#: renewal, unspent tokens back to the bucket). Then clients 1 and 2 drain the bucket and
#: client 0 tries again: a reserve still spendable after its renewal would admit there.
AGED_IN_USE = [
    *[Step(0, "take", 1, 0, 1) for _ in range(8)],
    Step(0, "take", 1, 0, 1500),
    Step(0, "take", 1, 0, 1550),
    *[Step(1 + i % 2, "take", 6 if i < 10 else 1, 0, 1) for i in range(20)],
    *[Step(0, "take", 1, 0, 1) for _ in range(6)],
]


class Clients:
    """CLIENTS repositories on one table and one simulated clock, and what they did."""

    def __init__(
        self, url: str, table: str, limit: Limit, reserve: bool | ReserveSettings = True
    ) -> None:
        self.clock = SimClock(1_700_000_000_000)
        self.url, self.table = url, table
        self.entity = f"prop-{uuid.uuid4().hex[:10]}"
        self.limit = limit
        self.repos = [
            SyncRepository.open(name=table, endpoint_url=url, clock=self.clock, reserve=reserve)
            for _ in range(CLIENTS)
        ]
        self.limiters = [SyncRateLimiter(repo) for repo in self.repos]
        self.limiters[0].set_limits(self.entity, [limit], RESOURCE)
        self.replay = Replay(limit, self.clock.now)
        self.skimpy_grants: list[str] = []
        self.reserve_takes = 0
        self.renewals = 0

    def play(self, step: Step) -> None:
        self.clock.now += step.advance_ms
        repo, limiter = self.repos[step.client], self.limiters[step.client]
        if step.kind.startswith("return"):
            repo.return_reserves(everything=step.kind == "return-all")
            return
        held_before = self._held(step.client)
        now, name = self.clock.now, self.limit.name
        try:
            with limiter.acquire(self.entity, RESOURCE, {name: step.amount}) as lease:
                self.replay.take(step.amount, now, True)
                if step.kind == "adjust":
                    lease.adjust(**{name: step.delta})
                    self.replay.adjust(step.delta, now)
                if step.kind == "rollback":
                    raise Boom
        except RateLimitExceeded:
            self.replay.take(step.amount, now, False)
        except Boom:
            self.replay.roll_back(step.amount, now)
        self._check_grant(step.client, held_before)

    def _held(self, client: int) -> int:
        return self.repos[client].get_reserve_stats().held.get(self.limit.name, 0)

    def _check_grant(self, client: int, held_before: int) -> None:
        grown = self._held(client) - held_before
        if grown <= 0:
            return
        self.reserve_takes += 1
        left = self.limiters[client].available(self.entity, RESOURCE)[self.limit.name]
        if left < grown:
            at = self.clock.now
            self.skimpy_grants.append(f"a reserve of {grown} left {left} behind at {at} ms")

    def check(self) -> None:
        assert not self.replay.violations, self.replay.violations
        assert not self.skimpy_grants, self.skimpy_grants

    def finish(self) -> None:
        """Close every client, then check that no token was created."""
        self.close()
        with SyncRepository.open(
            name=self.table, endpoint_url=self.url, clock=self.clock, reserve=False
        ) as reader:
            left = SyncRateLimiter(reader).available(self.entity, RESOURCE)[self.limit.name]
        ideal = self.replay.tokens_at(self.clock.now)
        assert left <= ideal, f"the table holds {left} tokens, an ideal bucket {ideal}"

    def close(self) -> None:
        for repo in self.repos:
            repo.close()
        self.renewals = sum(repo.get_reserve_stats().renewed for repo in self.repos)


def run_plan(
    url: str, table: str, limit: Limit, plan: list[Step], reserve: bool | ReserveSettings = True
) -> Clients:
    clients = Clients(url, table, limit, reserve)
    try:
        for step in plan:
            clients.play(step)
            clients.check()
        clients.finish()
    finally:
        clients.close()
    return clients
