"""This host's clock against DynamoDB's, and what the difference costs in tokens.

The library's own clock watch (`zae_limiter.clock_watch`) does the arithmetic; here it is
fed on purpose: a GetItem, then, knowing roughly when DynamoDB's second will tick, a
pause until just before it and GetItems back to back across it. The answers on either
side of a tick bound the offset to about two round trips (docs/doctor.md).

A client whose clock is `d` ms off admits up to `d x rate` tokens more than a limit of
that rate allows, never more than the limit's capacity (docs/buckets.md, "Clock skew");
the largest rate stored in the namespace gives the worst case.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zae_limiter.clock_watch import DATE_RESOLUTION_MS, WARN_AFTER_MS, ClockStats
from zae_limiter.doctor.context import Clock, Context, Sleep
from zae_limiter.doctor.report import Check, fail, ok, skip, warn
from zae_limiter.errors import ZaeLimiterError
from zae_limiter.flows.records import config
from zae_limiter.flows.records.namespace import list_limit_levels
from zae_limiter.flows.records.version import read_version
from zae_limiter.limits import Limit
from zae_limiter.repository import SyncRepository

NAME = "clock"
#: Past this the clock check fails: the library's own warning threshold.
FAIL_AFTER_MS = WARN_AFTER_MS
#: Past this it warns: well beyond NTP's few ms, worth a look before it grows.
WARN_AFTER = 100
#: Ask this long before the earliest moment the server's second may tick.
LEAD_MS = 30
#: Until a first tick is seen, ask this often (the first interval is this wide, plus a
#: round trip; the next tick, awaited from just before it, narrows it to round trips).
PACE_MS = 50
TICKS = 2
BUDGET_MS = 4000
MAX_ANSWERS = 400

_NTP = (
    "synchronise this host's clock: enable NTP (`timedatectl set-ntp true`, chrony); on "
    "EC2 use the Amazon Time Sync Service (169.254.169.123)"
)


def measure(
    ask: Callable[[], object],
    stats: Callable[[], ClockStats],
    clock: Clock,
    sleep: Sleep,
    ticks: int = TICKS,
    budget_ms: int = BUDGET_MS,
    max_answers: int = MAX_ANSWERS,
) -> ClockStats:
    """Ask until `ticks` ticks of the server's second were seen (or the budget is spent):
    every PACE_MS until the first, then back to back from just before each next one."""
    started = clock()
    ask()
    while True:
        seen = stats()
        spent = clock() - started
        if seen.dates > ticks or seen.answers >= max_answers or spent > budget_ms:
            return seen
        if seen.dates < 2 or seen.date_ms is None or seen.low_ms is None:
            # No tick seen: it may come any time in the next second, so ask every PACE_MS
            # (each answer before it raises the lower bound, the first after it pins it).
            sleep(PACE_MS / 1000)
        else:
            # The server's next second starts, on our clock, no earlier than this.
            earliest = seen.date_ms + DATE_RESOLUTION_MS + seen.low_ms
            wait = earliest - LEAD_MS - clock()
            if wait > 0:
                sleep(min(wait, budget_ms - spent) / 1000)
        ask()


@dataclass(frozen=True, slots=True)
class Fastest:
    """The limit with the largest rate stored in the namespace, and where it is set."""

    limit: Limit
    level: str

    @property
    def rate(self) -> float:
        return self.limit.refill_amount / self.limit.refill_period_seconds

    def cost(self, offset_ms: int) -> int:
        """Tokens a client `offset_ms` off may admit beyond this limit (capped at capacity)."""
        return min(self.limit.capacity, math.ceil(offset_ms * self.rate / 1000))


def fastest(repo: SyncRepository) -> Fastest | None:
    best: Fastest | None = None
    for entity, resource in repo.run(list_limit_levels(repo.state)):
        for limit in repo.run(config.get_limits(repo.state, entity, resource)):
            level = f"entity={entity or '*'} resource={resource or '*'}"
            found = Fastest(limit, level)
            if best is None or found.rate > best.rate:
                best = found
    return best


def judge(stats: ClockStats, top: Fastest | None, local: bool) -> Check:
    """Pure: the verdict on a measured offset."""
    if stats.low_ms is None or stats.high_ms is None:
        return skip(NAME, "the endpoint's answers carry no Date header to compare with")
    at_least, at_most = stats.at_least_ms or 0, stats.at_most_ms or 0
    offset, error = stats.offset_ms or 0.0, stats.error_ms or 0.0
    side = "ahead of" if offset > 0 else "behind"
    details: dict[str, Any] = {
        "offset_ms": offset, "error_ms": error, "low_ms": stats.low_ms, "high_ms": stats.high_ms,
        "answers": stats.answers, "ticks_seen": max(0, stats.dates - 1),
        "fastest_limit": None, "tokens_at_risk": None,
    }  # fmt: skip
    cost = ""
    if top is not None:
        tokens = top.cost(at_most)
        details["fastest_limit"] = {
            "name": top.limit.name, "level": top.level, "rate_per_second": top.rate,
            "capacity": top.limit.capacity,
        }  # fmt: skip
        details["tokens_at_risk"] = tokens
        cost = f"; up to {tokens} extra tokens of {top.limit.name!r} ({top.rate:g}/s, {top.level})"
    said = f"{abs(offset):.0f} ms {side} DynamoDB's (+- {error:.0f} ms){cost}"
    if local:
        said += "; a local engine shares this host's clock"
    if at_least > FAIL_AFTER_MS:
        return fail(NAME, f"this clock is {said}", _NTP, **details)
    if at_least > WARN_AFTER:
        return warn(NAME, f"this clock is {said}", _NTP, **details)
    return ok(NAME, f"this clock is {said}", **details)


def check(ctx: Context) -> Check:
    target = ctx.target
    try:
        repo = SyncRepository.open(
            target.namespace, name=target.name, region=target.region,
            endpoint_url=target.endpoint_url, check_schema=False, reserve=False,
            clock=target.clock,
        )  # fmt: skip
    except ZaeLimiterError as error:
        return skip(NAME, f"could not open the table to measure: {error}")
    try:
        stats = measure(
            lambda: repo.run(read_version(repo.state)), repo.get_clock_stats,
            target.clock, target.sleep,
        )  # fmt: skip
    except ZaeLimiterError as error:  # what was heard before the failure still counts
        stats = repo.get_clock_stats()
        if stats.low_ms is None:
            repo.close()
            return skip(NAME, f"could not measure: {error}")
    try:
        top = fastest(repo)
    except ZaeLimiterError:  # without Query on the namespace index the cost is unknown
        top = None
    finally:
        repo.close()
    return judge(stats, top, target.local)
