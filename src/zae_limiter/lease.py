"""Lease / SyncLease: what an acquire took, and the adjustments written when it ends."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from zae_limiter.errors import ValidationError
from zae_limiter.flows.acquire import Acquired, commit, compensate, validate_amounts

if TYPE_CHECKING:
    from zae_limiter.repository import Repository, SyncRepository
    from zae_limiter.stats import Outcome

#: A lease that holds nothing: allowed on failure, or rejected in shadow mode.
NOTHING = Acquired(())


class _LeaseState:
    """Buffers usage deltas; nothing is written until the lease ends."""

    def __init__(
        self, acquired: Acquired, consumed: Mapping[str, int], degraded: Outcome | None
    ) -> None:
        self.acquired = acquired
        self.consumed = dict(consumed)
        self.pending: dict[str, int] = {}
        self.degraded = degraded

    @property
    def holds_nothing(self) -> bool:
        return self.degraded is not None

    def add(self, amounts: Mapping[str, int], sign: int) -> None:
        milli = validate_amounts("adjust", dict(amounts), allow_negative=True)
        unknown = sorted(set(milli) - self.acquired.limit_names)
        if unknown and not self.holds_nothing:
            raise ValidationError(
                f"adjust names limits this lease does not hold: {unknown} "
                f"(held: {sorted(self.acquired.limit_names)})"
            )
        for name, value in milli.items():
            self.pending[name] = self.pending.get(name, 0) + sign * value

    @property
    def totals(self) -> dict[str, int]:
        """Whole tokens this lease accounts for, including buffered adjustments."""
        names = set(self.consumed) | set(self.pending)
        return {n: (self.consumed.get(n, 0) + self.pending.get(n, 0)) // 1000 for n in names}


class Lease:
    """Held inside `async with limiter.acquire(...) as lease`."""

    def __init__(
        self,
        repo: Repository,
        acquired: Acquired,
        consumed: Mapping[str, int],
        degraded: Outcome | None = None,
    ) -> None:
        self._repo = repo
        self._state = _LeaseState(acquired, consumed, degraded)

    @property
    def consumed(self) -> dict[str, int]:
        return self._state.totals

    @property
    def degraded(self) -> Outcome | None:
        """None for a real lease; "allowed_on_failure" or "shadow_rejected" for one that
        holds nothing (its adjustments are accepted and never written)."""
        return self._state.degraded

    async def adjust(self, **amounts: int) -> None:
        """Change consumption by these amounts (negative gives back); may leave debt."""
        self._state.add(amounts, 1)

    async def consume(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), 1)

    async def release(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), -1)

    async def _finish(self, failed: bool) -> None:
        if self._state.holds_nothing:
            return
        repo, state = self._repo, self._repo.state
        if failed:
            flow = compensate(state, self._state.acquired.taken)
        else:
            flow = commit(state, self._state.acquired, self._state.pending)
        await repo.run(flow, repo.timeout, cleanup=True)


class SyncLease:
    """Held inside `with limiter.acquire(...) as lease`."""

    def __init__(
        self,
        repo: SyncRepository,
        acquired: Acquired,
        consumed: Mapping[str, int],
        degraded: Outcome | None = None,
    ) -> None:
        self._repo = repo
        self._state = _LeaseState(acquired, consumed, degraded)

    @property
    def consumed(self) -> dict[str, int]:
        return self._state.totals

    @property
    def degraded(self) -> Outcome | None:
        """None for a real lease; "allowed_on_failure" or "shadow_rejected" for one that
        holds nothing (its adjustments are accepted and never written)."""
        return self._state.degraded

    def adjust(self, **amounts: int) -> None:
        """Change consumption by these amounts (negative gives back); may leave debt."""
        self._state.add(amounts, 1)

    def consume(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), 1)

    def release(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), -1)

    def _finish(self, failed: bool) -> None:
        if self._state.holds_nothing:
            return
        repo, state = self._repo, self._repo.state
        if failed:
            flow = compensate(state, self._state.acquired.taken)
        else:
            flow = commit(state, self._state.acquired, self._state.pending)
        repo.run(flow, repo.timeout, cleanup=True)


def _non_negative(amounts: Mapping[str, int]) -> Mapping[str, int]:
    validate_amounts("amounts", dict(amounts))
    return amounts


ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
