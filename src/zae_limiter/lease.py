"""Lease / SyncLease: what an acquire took, and the adjustments written when it ends."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from zae_limiter.errors import ValidationError
from zae_limiter.flows import Flow
from zae_limiter.flows.acquire import Acquired, validate_amounts
from zae_limiter.flows.regional_limits import end_lease, lease_changes
from zae_limiter.flows.reserves.ops import compensate, record_adjustments

if TYPE_CHECKING:
    from zae_limiter.flows.context import RepoState
    from zae_limiter.limits import Limit
    from zae_limiter.repository import Repository, SyncRepository
    from zae_limiter.stats import Decision

#: A lease that holds nothing: allowed on failure, or rejected in shadow mode.
NOTHING = Acquired(())


class _LeaseState:
    """Buffers usage deltas; nothing is written until the lease ends."""

    def __init__(
        self, acquired: Acquired, consumed: Mapping[str, int], degraded: Decision | None
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


class _Held:
    """What both lease faces hold: the buffered state, and the flow that ends it."""

    def __init__(
        self, acquired: Acquired, consumed: Mapping[str, int], degraded: Decision | None
    ) -> None:
        self._state = _LeaseState(acquired, consumed, degraded)

    @property
    def consumed(self) -> dict[str, int]:
        return self._state.totals

    @property
    def limits(self) -> tuple[Limit, ...]:
        """The limits this lease took from the entity (not from its cascade parent)."""
        own = self._state.acquired.own()
        return own.limits if own is not None else ()

    @property
    def remaining(self) -> dict[str, int] | None:
        """Whole tokens the entity had left per limit right after this acquire's write,
        other clients' takes included (for a sharded entity, its shard's figure times the
        shard count). None when the acquire wrote nothing for the entity: served from this
        client's token reserve, or a lease that holds nothing."""
        own = self._state.acquired.own()
        return own.remaining() if own is not None else None

    @property
    def degraded(self) -> Decision | None:
        """None for a real lease; "allowed_on_failure" or "shadow_rejected" for one that
        holds nothing (its adjustments are accepted and never written)."""
        return self._state.degraded

    def _closing(
        self, repo_state: RepoState, failed: bool, clock: Callable[[], int]
    ) -> Flow[None] | None:
        """Give everything back (failed) or record the adjustments; None: nothing to do
        (the common end of a lease, which then reads no clock).

        Both go into this client's token reserve of a bucket first (no request), and are
        written only when it holds none or cannot cover them.
        """
        held = self._state
        if held.degraded is not None or (not failed and not any(held.pending.values())):
            return None
        now_ms = clock()
        acquired = held.acquired
        if failed:
            flow = compensate(repo_state, acquired.taken, now_ms)
        else:
            flow = record_adjustments(repo_state, acquired.taken, held.pending, now_ms)
        if not acquired.shared:
            return flow
        changes = lease_changes(acquired.shared, held.pending, failed)
        return end_lease(repo_state, flow, changes, now_ms)


# unasync: source
class Lease(_Held):
    """Held inside `async with limiter.acquire(...) as lease`."""

    def __init__(
        self,
        repo: Repository,
        acquired: Acquired,
        consumed: Mapping[str, int],
        degraded: Decision | None = None,
    ) -> None:
        # _Held.__init__'s one line, here: a lease is made on every acquire.
        self._state = _LeaseState(acquired, consumed, degraded)
        self._repo = repo

    async def adjust(self, **amounts: int) -> None:
        """Change consumption by these amounts (negative gives back); may leave debt."""
        self._state.add(amounts, 1)

    async def consume(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), 1)

    async def release(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), -1)

    async def _finish(self, failed: bool) -> None:
        held = self._state
        if not failed and not held.pending:
            return  # the common end of a lease: nothing to give back or record
        flow = self._closing(self._repo.state, failed, self._repo.now_ms)
        if flow is not None:
            await self._repo.run(flow, self._repo.timeout, cleanup=True)


# unasync: generated from the source above by tools/unasync.py; do not edit
class SyncLease(_Held):
    """Held inside `with limiter.acquire(...) as lease`."""

    def __init__(
        self,
        repo: SyncRepository,
        acquired: Acquired,
        consumed: Mapping[str, int],
        degraded: Decision | None = None,
    ) -> None:
        # _Held.__init__'s one line, here: a lease is made on every acquire.
        self._state = _LeaseState(acquired, consumed, degraded)
        self._repo = repo

    def adjust(self, **amounts: int) -> None:
        """Change consumption by these amounts (negative gives back); may leave debt."""
        self._state.add(amounts, 1)

    def consume(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), 1)

    def release(self, **amounts: int) -> None:
        self._state.add(_non_negative(amounts), -1)

    def _finish(self, failed: bool) -> None:
        held = self._state
        if not failed and not held.pending:
            return  # the common end of a lease: nothing to give back or record
        flow = self._closing(self._repo.state, failed, self._repo.now_ms)
        if flow is not None:
            self._repo.run(flow, self._repo.timeout, cleanup=True)


# unasync: end


def _non_negative(amounts: Mapping[str, int]) -> Mapping[str, int]:
    validate_amounts("amounts", dict(amounts))
    return amounts
