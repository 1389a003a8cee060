"""Each mutant breaks one rule of exactness in the product; the exactness check of
tests/engine/exactness_clients.py (the property test's body) must catch every one, on
DynamoDB Local, with a plan that passes on the real code.

- a reserve granted without "as much again stays behind" (the grant takes all the spare
  tokens, and the write's bound no longer keeps the reserve's amount behind);
- a reserve that serves acquires without spending (its tokens are never subtracted);
- a take without its availability condition (the bound on the full-at time, `fa <= :b`,
  dropped from the write);
- a take on a full bucket that ADDs to the stored full-at time instead of setting it from
  now (issue 22's over-admission at the top of the bucket, put back);
- an aged reserve renewed by an acquire's write (its unspent tokens go back to the
  bucket) that also stays on the client's book as a young one, to be spent again.

Each check first runs on the real code (it must pass there: a check that fails anyway
proves nothing), then under the mutant, where it must fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.engine.burst_drivers import play_sync
from tests.engine.exactness_clients import AGED_IN_USE, AGED_SETTINGS, CLIENTS, Step, run_plan
from tests.exactness_model import burst_scenarios, fill_ms, judge
from tests.mutants import condition_rewritten, must_fail, mutant_wrapping
from zae_limiter import Limit, SyncRepository
from zae_limiter.flows.reserves import book as reserve_module
from zae_limiter.flows.reserves import hit
from zae_limiter.flows.reserves.book import ReserveSettings
from zae_limiter.flows.write import grants as grants_module
from zae_limiter.flows.write import plan as plan_module
from zae_limiter.keys import takes as takes_module

pytestmark = pytest.mark.engine

LIMIT = Limit.custom("rps", 40, 20, 1)
#: Three hot clients take 1-3 tokens every 4 ms between them (about 500 per second offered
#: against a refill of 20): reserves are taken and spent, then the limit binds.
BUSY = [Step(i % CLIENTS, "take", 1 + i % 3, 0, 4) for i in range(120)]
#: The same, then the clients hand their reserves back and the bucket refills a while:
#: enough for reserves to be granted again near the top, and spent down to empty.
BUSY_TWICE = [*BUSY, *[Step(c, "return-all", 1, 0, 0) for c in range(CLIENTS)],
              Step(0, "take", 1, 0, 1500), *BUSY]  # fmt: skip


def _killed(check: Callable[[], object], *patches: tuple[Any, str, Any]) -> str:
    """The failure `check` raised under the mutant (one or more patched functions),
    after passing on the real code."""
    check()
    with ExitStack() as stack:
        for owner, name, make in patches:
            stack.enter_context(mutant_wrapping(owner, name, make))
        return str(must_fail(check))


@pytest.fixture(scope="module")
def table(dynamodb_local: EngineEndpoint) -> str:
    name = unique_name()
    SyncRepository.open(name=name, endpoint_url=dynamodb_local.url, create_table=True).close()
    return name


def _guarantee(
    url: str, table: str, plan: list[Step], reserve: bool | ReserveSettings = True
) -> Callable[[], object]:
    def check() -> object:
        clients = run_plan(url, table, LIMIT, plan, reserve)
        if reserve:
            # The plan really exercises reserves, or a reserve mutant could not be seen.
            assert clients.reserve_takes > 0, "no reserve was taken"
        return clients

    return check


def _greedy_grant(original: Callable[..., dict[str, int]]) -> Callable[..., dict[str, int]]:
    def broken(
        hold: Mapping[str, int],
        tokens: Mapping[str, int],
        consume: Mapping[str, int],
        quotas: frozenset[str] = frozenset(),
    ) -> dict[str, int]:
        spare = {name: tokens.get(name, 0) - consume.get(name, 0) for name in hold}
        granted = {
            name: min(amount, max(0, spare[name])) // 1000 * 1000 for name, amount in hold.items()
        }
        return {name: amount for name, amount in granted.items() if amount > 0}

    return broken


def _bound_keeps_nothing_behind(original: Callable[..., Any]) -> Callable[..., Any]:
    def broken(*args: Any) -> Any:
        write = original(*args)
        bucket, _limit, seen, _now, _level, moves = args[:6]
        reserve = moves[0].get(write.name, 0)  # (granted, held moves, charged exactly)
        if write.bound is None or not reserve:
            return write
        return replace(write, bound=write.bound + reserve * seen[0].unit(bucket.shard_count))

    return broken


def _spend_keeps_tokens(original: Callable[..., int | None]) -> Callable[..., int | None]:
    """`ReserveBook.spend`, or the fast path's own spend (`hit._spend`, same arguments),
    leaving the reserve as it was."""

    def broken(self: Any, key: Any, limits: Any, consume: Any, now_ms: int) -> int | None:
        held = self.holding(key)
        before = dict(held.left) if held is not None else None
        shard = original(self, key, limits, consume, now_ms)
        if shard is not None and held is not None and before is not None:
            held.left.update(before)
        return shard

    return broken


def _renewal_keeps_the_reserve(original: Callable[..., Any]) -> Callable[..., Any]:
    def broken(self: Any, key: Any, limits: Any, shard_count: int, now_ms: int) -> Any:
        held = self.holding(key)
        flush = original(self, key, limits, shard_count, now_ms)
        if flush is not None and held is not None:
            held.born_ms = now_ms  # young again: its tokens are spent a second time
            self._reserves[key] = held
        return flush

    return broken


_AVAILABILITY = re.compile(r"#full_at_(\d+) <= :bound_\1")


#: Always true, and still uses the value (DynamoDB rejects unused values).
_no_availability_condition = condition_rewritten(_AVAILABILITY, r":bound_\1 = :bound_\1")


def test_a_reserve_granted_without_as_much_again_behind_is_caught(
    dynamodb_local: EngineEndpoint, table: str
) -> None:
    check = _guarantee(dynamodb_local.url, table, BUSY_TWICE)
    killed = _killed(
        check,
        (grants_module, "grant", _greedy_grant),
        (plan_module, "_limit_write", _bound_keeps_nothing_behind),
    )
    assert "behind" in killed


def test_a_reserve_spend_that_does_not_subtract_is_caught(
    dynamodb_local: EngineEndpoint, table: str
) -> None:
    check = _guarantee(dynamodb_local.url, table, BUSY)
    owner = reserve_module.ReserveBook
    killed = _killed(
        check, (owner, "spend", _spend_keeps_tokens), (hit, "_spend", _spend_keeps_tokens)
    )
    assert "admitted" in killed


def test_a_renewed_reserve_that_stays_on_the_book_is_caught(
    dynamodb_local: EngineEndpoint, table: str
) -> None:
    check = _guarantee(dynamodb_local.url, table, AGED_IN_USE, AGED_SETTINGS)
    killed = _killed(check, (reserve_module.ReserveBook, "renew", _renewal_keeps_the_reserve))
    assert "admitted" in killed or "holds" in killed, killed


def test_a_take_without_its_availability_condition_is_caught(
    dynamodb_local: EngineEndpoint, table: str
) -> None:
    # Reserves off: every take is the conditional write itself.
    check = _guarantee(dynamodb_local.url, table, BUSY, reserve=False)
    killed = _killed(check, (takes_module, "_expression", _no_availability_condition))
    assert "admitted" in killed


_NOT_FULL = re.compile(r"#full_at_(\d+) > :now_\1")


def _add_to_a_full_bucket(original: Callable[..., Any]) -> Callable[..., Any]:
    """The old speculative take: ADD to the stored value even when the bucket is full,
    so the refill it should have clamped at the capacity is kept (tokens created)."""

    def broken(*args: Any) -> Any:
        write = original(*args)
        if write.form != takes_module.SET:
            return write
        return replace(write, form=takes_module.ADD, amount=write.amount - write.now_ra)

    return broken


_no_not_full_condition = condition_rewritten(_NOT_FULL, r":now_\1 = :now_\1")


def test_a_take_that_adds_to_a_full_bucket_is_caught(dynamodb_local: EngineEndpoint) -> None:
    """Issue 22's over-admission put back (the take on a full bucket ADDs instead of
    SETting from now): the after-idle burst test must fail. Reserves off: with reserves
    on, the burst is served from held counts after a few takes, and the free takes
    before that stay within the test's allowance."""
    reserve = False
    limit = Limit.per_second("rps", 10)
    plan = next(s for s in burst_scenarios(fill_ms(limit)) if s.name == "after-idle").arrivals

    def check() -> object:
        # A table of its own each time: the simulated clock starts at the same time.
        fresh = unique_name()
        SyncRepository.open(name=fresh, endpoint_url=dynamodb_local.url, create_table=True).close()
        verdict = judge(limit, plan, play_sync(dynamodb_local.url, fresh, limit, plan, reserve))
        assert verdict.admitted <= verdict.ideal + 1, f"admitted past the ideal: {verdict}"
        return verdict

    killed = _killed(
        check,
        (plan_module, "_limit_write", _add_to_a_full_bucket),
        (takes_module, "_expression", _no_not_full_condition),
    )
    assert "admitted past the ideal" in killed
