"""From an acquire's call to its lease: `AsyncAcquiring` / `SyncAcquiring`, what
`limiter.acquire()` returns (served from this client's token reserve, or the full path run
by the repository's runner), the decision it makes (`_Decisions`: failure policy, shadow
mode, the counters of `DecisionStats`), and `Lease` / `SyncLease`, what it took and the
adjustments written when it ends."""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded, ValidationError
from zae_limiter.flows import Flow
from zae_limiter.flows import acquire as acquire_flow
from zae_limiter.flows.acquire import Acquired, validate_amounts
from zae_limiter.flows.records.config import (
    FailurePolicy,
    check_failure_policy,
    stored_failure_policy,
)
from zae_limiter.flows.regional_limits import end_lease, lease_changes
from zae_limiter.flows.reserves import hit
from zae_limiter.flows.reserves.ops import compensate, record_adjustments
from zae_limiter.regional import prepare_shares, tend_shares
from zae_limiter.repository import Repository, SyncRepository, _Base
from zae_limiter.stats import (
    LATENCY_BUCKETS_MS,
    OUTCOMES,
    Decision,
    LimiterStats,
    Listener,
    ResourceStats,
)

if TYPE_CHECKING:
    from zae_limiter.flows.context import RepoState
    from zae_limiter.limits import Limit

log = logging.getLogger("zae_limiter")

Resources = str | Sequence[str]
AcquireArgs = tuple[str, Resources, Mapping[str, int], Sequence["Limit"] | None]

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


# ---------------------------------------------------------------- the decision
class _Decisions:
    """The failure policy, shadow mode and decision metrics, shared by both faces.

    Policy order: the call's `on_unavailable`, then the limiter's, then the one stored in
    the system defaults (as this client last read it), then "block".
    """

    def __init__(self, repo: _Base, on_unavailable: FailurePolicy | None, shadow: bool) -> None:
        self._repo = repo
        self.on_unavailable = (
            None if on_unavailable is None else check_failure_policy(on_unavailable)
        )
        self.shadow = shadow
        self.stats = DecisionStats()
        #: Seconds, for latency (monotonic; replaceable in tests).
        self.timer: Callable[[], float] = time.perf_counter

    def policy(self, call: FailurePolicy | None) -> FailurePolicy:
        for value in (call, self.on_unavailable, stored_failure_policy(self._repo.state)):
            if value is not None:
                return check_failure_policy(value)
        return "block"

    def record(self, resource: Resources, outcome: Decision, started: float) -> None:
        """One decision; an acquire of several resources is a decision of each."""
        latency = (self.timer() - started) * 1000
        for name in (resource,) if isinstance(resource, str) else resource:
            self.stats.record(name, outcome, latency)

    def record_soft(self, resource: Resources, over: Iterable[tuple[str, str]]) -> None:
        names = [name for _entity, name in over]
        for each in (resource,) if isinstance(resource, str) else resource:
            self.stats.record_soft(each, names)

    def degrade(
        self, error: Exception, resource: Resources, started: float, call: FailurePolicy | None
    ) -> Decision:
        """What a failed acquire becomes: a lease holding nothing, or the error raised."""
        if isinstance(error, RateLimitExceeded):
            if self.shadow:
                return "shadow_rejected"
            self.record(resource, "rejected", started)
            raise error
        if self.policy(call) == "allow":
            log.warning("rate limiter unavailable, request allowed: %s", error)
            return "allowed_on_failure"
        self.record(resource, "unavailable", started)
        raise error

    def decide(
        self,
        resource: Resources,
        started: float,
        call: FailurePolicy | None,
        acquired: Acquired | None = None,
        error: Exception | None = None,
    ) -> tuple[Acquired, Decision | None]:
        """What the lease holds, and why it holds nothing (None when admitted)."""
        outcome: Decision = "admitted"
        if error is not None:
            outcome = self.degrade(error, resource, started, call)
        elif acquired is not None and acquired.bypassed:
            outcome = "bypassed"
        elif acquired is not None and (over := acquired.soft_exceeded()):
            self.record_soft(resource, over)
        if isinstance(resource, str):  # one resource: its decision, without a loop
            self.stats.record(resource, outcome, (self.timer() - started) * 1000)
        else:
            self.record(resource, outcome, started)
        held = acquired if acquired is not None and error is None else NOTHING
        return held, None if outcome in ("admitted", "bypassed") else outcome


class _Counters:
    __slots__ = ("latency", "latency_sum", "outcomes", "soft", "soft_by_limit")

    def __init__(self) -> None:
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self.latency = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.latency_sum = 0.0
        self.soft = 0
        self.soft_by_limit: dict[str, int] = {}

    def freeze(self) -> ResourceStats:
        return ResourceStats(
            **self.outcomes,
            latency_counts=tuple(self.latency),
            latency_sum_ms=self.latency_sum,
            soft_rejected=self.soft,
            soft_rejected_by_limit=dict(self.soft_by_limit),
        )


class DecisionStats:
    """Counters per resource; `record` is called once per acquire."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_resource: dict[str, _Counters] = {}
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def record(self, resource: str, outcome: Decision, latency_ms: float) -> None:
        with self._lock:
            counters = self._by_resource.get(resource)
            if counters is None:
                counters = self._by_resource[resource] = _Counters()
            counters.outcomes[outcome] += 1
            counters.latency[bisect.bisect_left(LATENCY_BUCKETS_MS, latency_ms)] += 1
            counters.latency_sum += latency_ms
        for listener in list(self._listeners):
            listener(resource, outcome, latency_ms)

    def record_soft(self, resource: str, limit_names: Iterable[str]) -> None:
        """An admitted acquire that went past these soft limits (each named once)."""
        with self._lock:
            counters = self._by_resource.get(resource)
            if counters is None:
                counters = self._by_resource[resource] = _Counters()
            counters.soft += 1
            for name in set(limit_names):
                counters.soft_by_limit[name] = counters.soft_by_limit.get(name, 0) + 1

    def snapshot(self) -> LimiterStats:
        with self._lock:
            return LimiterStats({r: c.freeze() for r, c in self._by_resource.items()})

    def reset(self) -> None:
        with self._lock:
            self._by_resource.clear()


# ---------------------------------------------------------------- the acquire
_FAILED = (RateLimitExceeded, RateLimiterUnavailable)
LeaseParts = tuple[Acquired, Mapping[str, int], Decision | None]
RepoT = TypeVar("RepoT", Repository, SyncRepository)


class _Acquiring(Generic[RepoT]):
    """What `acquire()` returns: the acquire runs when the block is entered; the lease
    ends when it is left (its adjustments written, or everything it took given back when
    the block raised). A plain class rather than a generator-based context manager: the
    hot path pays for no generator and no contextlib frames."""

    __slots__ = ("_args", "_decisions", "_lease", "_policy", "_repo", "_speculative", "_started")
    _repo: RepoT

    def __init__(
        self,
        decisions: _Decisions,
        speculative: bool,
        repo: RepoT,
        args: AcquireArgs,
        policy: FailurePolicy | None,
    ) -> None:
        self._decisions = decisions
        self._speculative = speculative
        self._repo = repo
        self._args = args
        self._policy = policy
        self._started = 0.0

    def _begin(self) -> Flow[Acquired]:
        """Check the call's policy and build the acquire flow; the decision's time starts."""
        if self._policy is not None:
            check_failure_policy(self._policy)
        repo = self._repo
        if repo.state.shares is None:  # made once, on the first acquire
            prepare_shares(repo)
        entity_id, resource, consume, limits = self._args
        flow = acquire_flow.acquire(
            repo.state, entity_id, resource, consume, limits, repo.clock(), self._speculative
        )
        self._started = self._decisions.timer()
        return flow

    def _served(self) -> LeaseParts | None:
        """An acquire this client's token reserve serves (flows/reserves/hit.py): no flow,
        no driver, no request. None: the full path decides. Asked only with reserves on."""
        repo, decisions = self._repo, self._decisions
        entity_id, resource, consume, limits = self._args
        if not isinstance(resource, str):
            return None  # several resources: the full path takes them all or none
        if self._policy is not None:
            check_failure_policy(self._policy)
        self._started = started = decisions.timer()
        served = hit.serve(repo.state, entity_id, resource, consume, limits, repo.clock())
        if served is None:
            return None
        taken, amounts = served
        decisions.stats.record(resource, "admitted", (decisions.timer() - started) * 1000)
        keeper = repo._keeper  # one watching the book needs no call: asked of its field
        if keeper is not None and not keeper.watching:
            repo.tend_reserves()
        return Acquired((taken,), amounts, entity_id), amounts, None

    def _lease_parts(self, acquired: Acquired | None, error: Exception | None) -> LeaseParts:
        """What the lease holds, what it starts from, and why it holds nothing; the
        reserves are tended after an acquire that reached DynamoDB's answer."""
        decisions, resource = self._decisions, self._args[1]
        held, why = decisions.decide(resource, self._started, self._policy, acquired, error)
        repo = self._repo
        if error is None and repo.state.reserves is not None:  # else no reserve to tend
            repo.tend_reserves()
        shares = repo.state.shares
        if shares is not None and shares.waiting:  # a global limit's keeper to start
            tend_shares(repo)
        # What the lease starts from: validated by the acquire that took it (else here).
        consumed = held.consumed_milli or validate_amounts("consume", self._args[2])
        return held, consumed, why


# unasync: source
class AsyncAcquiring(_Acquiring[Repository]):
    """`async with limiter.acquire(...) as lease:`"""

    __slots__ = ()

    async def __aenter__(self) -> Lease:
        repo = self._repo
        # Reserves off: every acquire is the full path, run by the repository's runner.
        parts = None if repo.state.reserves is None else self._served()
        if parts is None:
            try:
                acquired = await repo._runner.run(self._begin(), repo.timeout)
                parts = self._lease_parts(acquired, None)
            except _FAILED as error:
                parts = self._lease_parts(None, error)
        self._lease = Lease(repo, *parts)
        return self._lease

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        await self._lease._finish(failed=kind is not None)


# unasync: generated from the source above by tools/unasync.py; do not edit
class SyncAcquiring(_Acquiring[SyncRepository]):
    """`with limiter.acquire(...) as lease:`"""

    __slots__ = ()

    def __enter__(self) -> SyncLease:
        repo = self._repo
        # Reserves off: every acquire is the full path, run by the repository's runner.
        parts = None if repo.state.reserves is None else self._served()
        if parts is None:
            try:
                acquired = repo._runner.run(self._begin(), repo.timeout)
                parts = self._lease_parts(acquired, None)
            except _FAILED as error:
                parts = self._lease_parts(None, error)
        self._lease = SyncLease(repo, *parts)
        return self._lease

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._lease._finish(failed=kind is not None)


# unasync: end
