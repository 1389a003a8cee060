"""RateLimiter (async) and SyncRateLimiter: thin public faces over the flows.

Every operation but `acquire` is written once in `operations.Operations` and becomes a
method of both faces through `async_face` / `sync_face`; `acquire` is a context manager,
so each face keeps its own few lines around the shared `_Decisions`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded
from zae_limiter.flows import Flow
from zae_limiter.flows import acquire as acquire_flow
from zae_limiter.flows.acquire import Acquired, validate_amounts
from zae_limiter.flows.records.config import (
    FailurePolicy,
    check_failure_policy,
    stored_failure_policy,
)
from zae_limiter.flows.reserves import hit
from zae_limiter.flows.reserves.book import ReserveStats
from zae_limiter.lease import NOTHING, Lease, SyncLease
from zae_limiter.limits import Limit
from zae_limiter.operations import Operations, async_face, sync_face
from zae_limiter.regional import prepare_shares, tend_shares
from zae_limiter.repository import Repository, SyncRepository, _Base
from zae_limiter.stats import Decision, DecisionStats, LimiterStats

log = logging.getLogger("zae_limiter")

_FAILED = (RateLimitExceeded, RateLimiterUnavailable)
Resources = str | Sequence[str]
AcquireArgs = tuple[str, Resources, Mapping[str, int], Sequence[Limit] | None]


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


class _Face:
    """What both faces hold: the operations, the decisions, the stats."""

    def __init__(
        self,
        repository: _Base,
        speculative_writes: bool,
        on_unavailable: FailurePolicy | None,
        shadow: bool,
    ) -> None:
        self._ops = Operations(repository)
        self._speculative = speculative_writes
        self._decisions = _Decisions(repository, on_unavailable, shadow)

    @property
    def stats(self) -> DecisionStats:
        return self._decisions.stats

    def get_stats(self) -> LimiterStats:
        """Decisions per resource (admitted, rejected, allowed on failure, shadow
        rejections, unavailable) and the acquire latency histogram."""
        return self._decisions.stats.snapshot()

    def get_reserve_stats(self) -> ReserveStats:
        """Token reserves: acquires served from memory, reserve writes, returns."""
        return self._ops.reserve_stats()


# unasync: source
class RateLimiter(_Face):
    """Async rate limiter. `async with limiter.acquire(...) as lease:` guards a call.

    `on_unavailable="allow"` admits requests when DynamoDB cannot be reached (default
    "block": `RateLimiterUnavailable`); `shadow=True` records rejections but never raises
    `RateLimitExceeded`.
    """

    def __init__(
        self,
        repository: Repository,
        *,
        speculative_writes: bool = True,
        on_unavailable: FailurePolicy | None = None,
        shadow: bool = False,
    ) -> None:
        super().__init__(repository, speculative_writes, on_unavailable, shadow)
        self.repository = repository

    async def close(self) -> None:
        """Return this client's token reserves and close the repository."""
        await self.repository.close()

    async def __aenter__(self) -> RateLimiter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def acquire(
        self,
        entity_id: str,
        resource: str | Sequence[str],
        consume: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
        on_unavailable: FailurePolicy | None = None,
    ) -> AsyncAcquiring:
        """Take `consume` from the entity (and its parent, with cascade) for the block.

        `resource` may name several resources (["gpt-4", "all-models"]): each limit in
        `consume` is taken from every one of them that has a limit of that name, all or
        nothing, in one round trip (docs/controls.md, "Several resources in one acquire")."""
        args = (entity_id, resource, consume, limits)
        return AsyncAcquiring(self, self.repository, args, on_unavailable)

    create_entity = async_face(Operations.create_entity)
    get_entity = async_face(Operations.get_entity)
    get_entities = async_face(Operations.get_entities)
    delete_entity = async_face(Operations.delete_entity)
    get_children = async_face(Operations.get_children)
    list_entities = async_face(Operations.list_entities)
    set_limits = async_face(Operations.set_limits)
    get_limits = async_face(Operations.get_limits)
    delete_limits = async_face(Operations.delete_limits)
    set_resource_defaults = async_face(Operations.set_resource_defaults)
    get_resource_defaults = async_face(Operations.get_resource_defaults)
    delete_resource_defaults = async_face(Operations.delete_resource_defaults)
    set_system_defaults = async_face(Operations.set_system_defaults)
    get_system_defaults = async_face(Operations.get_system_defaults)
    delete_system_defaults = async_face(Operations.delete_system_defaults)
    set_bucket_ttl = async_face(Operations.set_bucket_ttl)
    get_bucket_ttl = async_face(Operations.get_bucket_ttl)
    get_failure_policy = async_face(Operations.get_failure_policy)
    resolve_limits = async_face(Operations.resolve_limits)
    available = async_face(Operations.available)
    time_until_available = async_face(Operations.time_until_available)
    get_shards = async_face(Operations.get_shards)
    list_resources = async_face(Operations.list_resources)
    get_usage_snapshots = async_face(Operations.get_usage_snapshots)
    get_usage_summary = async_face(Operations.get_usage_summary)
    update_entity = async_face(Operations.update_entity)
    set_parent = async_face(Operations.set_parent)
    list_limit_levels = async_face(Operations.list_limit_levels)
    get_audit_events = async_face(Operations.get_audit_events)
    list_namespaces = async_face(Operations.list_namespaces)
    namespace_info = async_face(Operations.namespace_info)
    delete_namespace = async_face(Operations.delete_namespace)
    reset_bucket = async_face(Operations.reset_bucket)
    top_up = async_face(Operations.top_up)


# unasync: generated from the source above by tools/unasync.py; do not edit
class SyncRateLimiter(_Face):
    """Sync rate limiter. `with limiter.acquire(...) as lease:` guards a call.

    `on_unavailable="allow"` admits requests when DynamoDB cannot be reached (default
    "block": `RateLimiterUnavailable`); `shadow=True` records rejections but never raises
    `RateLimitExceeded`.
    """

    def __init__(
        self,
        repository: SyncRepository,
        *,
        speculative_writes: bool = True,
        on_unavailable: FailurePolicy | None = None,
        shadow: bool = False,
    ) -> None:
        super().__init__(repository, speculative_writes, on_unavailable, shadow)
        self.repository = repository

    def close(self) -> None:
        """Return this client's token reserves and close the repository."""
        self.repository.close()

    def __enter__(self) -> SyncRateLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def acquire(
        self,
        entity_id: str,
        resource: str | Sequence[str],
        consume: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
        on_unavailable: FailurePolicy | None = None,
    ) -> SyncAcquiring:
        """Take `consume` from the entity (and its parent, with cascade) for the block.

        `resource` may name several resources (["gpt-4", "all-models"]): each limit in
        `consume` is taken from every one of them that has a limit of that name, all or
        nothing, in one round trip (docs/controls.md, "Several resources in one acquire")."""
        args = (entity_id, resource, consume, limits)
        return SyncAcquiring(self, self.repository, args, on_unavailable)

    create_entity = sync_face(Operations.create_entity)
    get_entity = sync_face(Operations.get_entity)
    get_entities = sync_face(Operations.get_entities)
    delete_entity = sync_face(Operations.delete_entity)
    get_children = sync_face(Operations.get_children)
    list_entities = sync_face(Operations.list_entities)
    set_limits = sync_face(Operations.set_limits)
    get_limits = sync_face(Operations.get_limits)
    delete_limits = sync_face(Operations.delete_limits)
    set_resource_defaults = sync_face(Operations.set_resource_defaults)
    get_resource_defaults = sync_face(Operations.get_resource_defaults)
    delete_resource_defaults = sync_face(Operations.delete_resource_defaults)
    set_system_defaults = sync_face(Operations.set_system_defaults)
    get_system_defaults = sync_face(Operations.get_system_defaults)
    delete_system_defaults = sync_face(Operations.delete_system_defaults)
    set_bucket_ttl = sync_face(Operations.set_bucket_ttl)
    get_bucket_ttl = sync_face(Operations.get_bucket_ttl)
    get_failure_policy = sync_face(Operations.get_failure_policy)
    resolve_limits = sync_face(Operations.resolve_limits)
    available = sync_face(Operations.available)
    time_until_available = sync_face(Operations.time_until_available)
    get_shards = sync_face(Operations.get_shards)
    list_resources = sync_face(Operations.list_resources)
    get_usage_snapshots = sync_face(Operations.get_usage_snapshots)
    get_usage_summary = sync_face(Operations.get_usage_summary)
    update_entity = sync_face(Operations.update_entity)
    set_parent = sync_face(Operations.set_parent)
    list_limit_levels = sync_face(Operations.list_limit_levels)
    get_audit_events = sync_face(Operations.get_audit_events)
    list_namespaces = sync_face(Operations.list_namespaces)
    namespace_info = sync_face(Operations.namespace_info)
    delete_namespace = sync_face(Operations.delete_namespace)
    reset_bucket = sync_face(Operations.reset_bucket)
    top_up = sync_face(Operations.top_up)


# unasync: end


LeaseParts = tuple[Acquired, Mapping[str, int], Decision | None]
RepoT = TypeVar("RepoT", Repository, SyncRepository)


class _Acquiring(Generic[RepoT]):
    """What `acquire()` returns: the acquire runs when the block is entered; the lease
    ends when it is left (its adjustments written, or everything it took given back when
    the block raised). A plain class rather than a generator-based context manager: the
    hot path pays for no generator and no contextlib frames."""

    __slots__ = ("_args", "_face", "_lease", "_policy", "_repo", "_started")
    _repo: RepoT

    def __init__(
        self,
        face: _Face,
        repo: RepoT,
        args: AcquireArgs,
        policy: FailurePolicy | None,
    ) -> None:
        self._face = face
        self._repo = repo
        self._args = args
        self._policy = policy
        self._started = 0.0

    def _begin(self) -> Flow[Acquired]:
        """Check the call's policy and build the acquire flow; the decision's time starts."""
        if self._policy is not None:
            check_failure_policy(self._policy)
        face, repo = self._face, self._repo
        if repo.state.shares is None:  # made once, on the first acquire
            prepare_shares(repo)
        entity_id, resource, consume, limits = self._args
        flow = acquire_flow.acquire(
            repo.state, entity_id, resource, consume, limits, repo.clock(), face._speculative
        )
        self._started = face._decisions.timer()
        return flow

    def _served(self) -> LeaseParts | None:
        """An acquire this client's token reserve serves (flows/reserves/hit.py): no flow,
        no driver, no request. None: the full path decides. Asked only with reserves on."""
        repo, decisions = self._repo, self._face._decisions
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
        decisions, resource = self._face._decisions, self._args[1]
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
