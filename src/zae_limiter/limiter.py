"""RateLimiter (async) and SyncRateLimiter: thin public faces over the flows.

Every operation but `acquire` is written once in `operations.Operations` and becomes a
method of both faces through `async_face` / `sync_face`; `acquire` returns the
`AsyncAcquiring` / `SyncAcquiring` of lease.py, where the acquire runs, is decided
(`_Decisions`) and becomes a lease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zae_limiter.flows.records.config import FailurePolicy
from zae_limiter.flows.reserves.book import ReserveStats
from zae_limiter.lease import AsyncAcquiring, DecisionStats, SyncAcquiring, _Decisions
from zae_limiter.limits import Limit
from zae_limiter.operations import Operations, async_face, sync_face
from zae_limiter.repository import Repository, SyncRepository, _Base
from zae_limiter.stats import LimiterStats


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
        decisions = self._decisions
        return AsyncAcquiring(decisions, self._speculative, self.repository, args, on_unavailable)

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
        decisions = self._decisions
        return SyncAcquiring(decisions, self._speculative, self.repository, args, on_unavailable)

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
