"""Lease / SyncLease: what an acquire took, and the adjustments written when it ends."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from zae_limiter.errors import ValidationError
from zae_limiter.flows.acquire import Acquired, commit, compensate, validate_amounts

if TYPE_CHECKING:
    from zae_limiter.repository import Repository, SyncRepository


class _LeaseState:
    """Buffers usage deltas; nothing is written until the lease ends."""

    def __init__(self, acquired: Acquired, consumed: Mapping[str, int]) -> None:
        self.acquired = acquired
        self.consumed = dict(consumed)
        self.pending: dict[str, int] = {}

    def add(self, amounts: Mapping[str, int], sign: int) -> None:
        milli = validate_amounts("adjust", dict(amounts), allow_negative=True)
        unknown = sorted(set(milli) - self.acquired.limit_names)
        if unknown:
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

    def __init__(self, repo: Repository, acquired: Acquired, consumed: Mapping[str, int]) -> None:
        self._repo = repo
        self._state = _LeaseState(acquired, consumed)

    @property
    def consumed(self) -> dict[str, int]:
        return self._state.totals

    async def adjust(self, **amounts: int) -> None:
        """Change consumption by these amounts (negative gives back); may leave debt."""
        self._state.add(amounts, 1)

    async def consume(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), 1)

    async def release(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), -1)

    async def _finish(self, failed: bool) -> None:
        state = self._repo.state
        if failed:
            await self._repo.run(compensate(state, self._state.acquired.taken))
        else:
            await self._repo.run(commit(state, self._state.acquired, self._state.pending))


class SyncLease:
    """Held inside `with limiter.acquire(...) as lease`."""

    def __init__(
        self, repo: SyncRepository, acquired: Acquired, consumed: Mapping[str, int]
    ) -> None:
        self._repo = repo
        self._state = _LeaseState(acquired, consumed)

    @property
    def consumed(self) -> dict[str, int]:
        return self._state.totals

    def adjust(self, **amounts: int) -> None:
        """Change consumption by these amounts (negative gives back); may leave debt."""
        self._state.add(amounts, 1)

    def consume(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), 1)

    def release(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), -1)

    def _finish(self, failed: bool) -> None:
        state = self._repo.state
        if failed:
            self._repo.run(compensate(state, self._state.acquired.taken))
        else:
            self._repo.run(commit(state, self._state.acquired, self._state.pending))


def _non_negative(amounts: Mapping[str, int]) -> Mapping[str, int]:
    validate_amounts("amounts", dict(amounts))
    return amounts


ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
