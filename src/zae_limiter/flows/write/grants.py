"""What a write may hold back for a reserve, and how long a refusal is remembered.

A reserve is granted only while enough stays behind for everyone else (as much again for
a refilling limit, `QUOTA_BEHIND` times as much for a quota); a refusal waits for the
refill it needs, or for a quota's reset, or briefly while reserves hold the tokens it
lacks. Pure: `flows.write.plan` asks these when it plans a write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zae_limiter.bucket import LimitState
from zae_limiter.flows.write.levels import Level
from zae_limiter.models import LimitStatus

#: A reserve that the bucket can only grant below this share of what was asked is not
#: worth its tokens idling: the acquire takes exactly what it needs instead.
MIN_GRANT_SHARE = 0.25
#: A quota leaves this many times a reserve behind for the rest of its clients, where a
#: refilling limit leaves as much again. Nothing refills a quota before its reset, so a
#: reserve whose holder falls silent (a starved process, a quiet client) keeps its tokens
#: out of the window while every other client is refused: the tail of a window is served
#: by the exact path, and a reserve taken while `s` tokens remain holds at most `s / 17`.
#: Its holder then has to fall 16 times behind the others' pace before the table runs dry
#: (docs/quotas.md, "Reserves near a quota's end"; 998 or 999 of 1,000 on DynamoDB Local
#: when a loaded machine starved a holder of the half that was left behind before).
QUOTA_BEHIND = 16


def grant(
    hold: Mapping[str, int],
    tokens: Mapping[str, int],
    consume: Mapping[str, int],
    quotas: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """The reserve the bucket can grant: what was asked, scaled down (all limits alike) so
    that at least as much again stays behind (`QUOTA_BEHIND` times as much for a quota
    among `quotas`); {} when that is too little to be worth it."""
    if not hold:
        return {}  # no reserve asked: every write of a client without reserves
    asked = {name: amount for name, amount in hold.items() if amount > 0}
    if not asked:
        return {}
    share = 1.0
    for name, amount in asked.items():
        spare = tokens.get(name, 0) - consume.get(name, 0)
        parts = QUOTA_BEHIND + 1 if name in quotas else 2
        share = min(share, max(0, spare // parts) / amount)
    if share < MIN_GRANT_SHARE:
        return {}
    # Whole tokens: acquires and adjustments move whole tokens, so a fraction left in a
    # reserve (or in the bucket) could never be spent by either.
    granted = {name: int(amount * share) // 1000 * 1000 for name, amount in asked.items()}
    return {name: amount for name, amount in granted.items() if amount}


#: A quota refused while reserves hold some of its tokens is remembered this long only,
#: not to its reset: what the holders do not spend comes back with their returns (an
#: idle reserve, a closing client), and clients that remembered the refusal to the reset
#: would never see it (docs/quotas.md, "Reserves near a quota's end").
HELD_RECHECK_MS = 50


def remembered_until(
    states: Mapping[str, tuple[LimitState, int, bool]],
    violations: Sequence[LimitStatus],
    now_ms: int,
    wait: int,
) -> int:
    for status in violations:
        state, held, _rebase = states[status.limit_name]
        if held > 0 and state.window is not None:
            return now_ms + min(wait, HELD_RECHECK_MS)
    return now_ms + wait


def never_wait(state: LimitState, need: int, count: int, now_ms: int) -> int:
    """How long a take its shard cannot hold waits. A quota (whose 1 ms "period" would
    make a tight loop): asked more than a shard's share, its reset (a full shard said
    1 ms); with reserves holding its room, until the shard is full, as before."""
    if state.window is None:
        return state.refill_period_ms
    if need > state.room(count):
        return to_reset(state, now_ms)
    return state.full_in_ms(now_ms)


def to_reset(state: LimitState, now_ms: int) -> int:
    """A quota: milliseconds to the end of its window (a session not opened: a session's
    length, by when the shard count may have changed)."""
    end = state.reset_at(now_ms)
    if end is not None:
        return end - now_ms
    return state.window.session_ms or 0 if state.window is not None else 0


def granted(level: Level, tokens: Mapping[str, int]) -> dict[str, int]:
    quotas = frozenset(limit.name for limit in level.limits if limit.window is not None)
    return grant(level.hold_milli, tokens, level.consume_milli, quotas)
