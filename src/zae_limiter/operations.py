"""Every public limiter operation but `acquire`, written once as a flow builder.

`RateLimiter` and `SyncRateLimiter` take these as their methods through `async_face` and
`sync_face`: the signature, the docstring and the behaviour live here alone, and the two
faces differ only in whether the driver is awaited.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.flows import Flow, bucket_ttl
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.offpath import controls, read, shards
from zae_limiter.flows.offpath.controls import TopUp
from zae_limiter.flows.records import audit as audit_flows
from zae_limiter.flows.records import config, entities, namespace
from zae_limiter.flows.records import usage as usage_flows
from zae_limiter.flows.records.audit import Auditor
from zae_limiter.flows.records.config import FailurePolicy
from zae_limiter.flows.records.entities import UNSET, _Unset
from zae_limiter.flows.records.namespace import DEFAULT_DELETE_WCU, NamespaceInfo, Progress
from zae_limiter.flows.records.usage import DEFAULT_SUMMARY_WINDOW, TimeArg
from zae_limiter.flows.reserves.book import ReserveStats
from zae_limiter.limits import Limit
from zae_limiter.models import (
    AuditEvent,
    Entity,
    ResolvedLimits,
    ShardInfo,
    UsageSnapshot,
    UsageSummary,
)

if TYPE_CHECKING:
    from zae_limiter.repository import Repository, SyncRepository, _Base

P = ParamSpec("P")
T = TypeVar("T")
OpT = TypeVar("OpT", bound=Callable[..., Any])


def audited(op: OpT) -> OpT:
    """Marks an operation that changes configuration: the faces make sure the principal is
    known (STS, once per client) before they build its flow."""
    op.audited = True  # type: ignore[attr-defined]
    return op


class Operations:
    """Flow builders bound to one repository's state and clock."""

    def __init__(self, repo: _Base) -> None:
        self._repo = repo
        self._sequence = itertools.count()

    @property
    def state(self) -> RepoState:
        return self._repo.state

    def now(self) -> int:
        return self._repo.now_ms()

    def reserve_stats(self) -> ReserveStats:
        return self._repo.get_reserve_stats()

    def auditor(self) -> Auditor:
        """Who and when, for the audit event of the change being built."""
        principal = self._repo.principal or "unknown"
        retention = self._repo.audit_retention_days
        return Auditor(principal, self.now(), retention, self._event_id)

    def _operator(self, principal: str | None) -> Auditor:
        """The auditor of an operator's control: `principal` names who, when given."""
        auditor = self.auditor()
        if principal is None:
            return auditor
        if not isinstance(principal, str) or not principal.strip():
            raise ValidationError(f"principal must be a non-empty string, got {principal!r}")
        return dataclasses.replace(auditor, principal=principal)

    def _event_id(self) -> str:
        # Events of one millisecond sort by id: a per-client sequence keeps this client's
        # in the order they were made; the random part keeps clients apart.
        return f"{next(self._sequence):08x}{uuid.uuid4().hex[:8]}"

    # ------------------------------------------------------------ entities
    @audited
    def create_entity(
        self,
        entity_id: str,
        name: str | None = None,
        *,
        parent_id: str | None = None,
        cascade: bool = False,
        cascade_for: Mapping[str, bool] | None = None,
        bypass: bool = False,
    ) -> Flow[Entity]:
        """Create an entity; with `cascade=True` its acquires also take from `parent_id`.
        `cascade_for` decides per resource, over `cascade` ({"gpt-4": True}: acquires of
        gpt-4 cascade, the others as `cascade` says). `bypass=True`: its acquires take
        nothing and never reject (an internal key; docs/controls.md)."""
        return entities.create_entity(
            self.state, entity_id, name, parent_id, cascade, self.auditor(), cascade_for, bypass
        )

    @audited
    def update_entity(
        self,
        entity_id: str,
        *,
        name: str | _Unset | None = UNSET,
        parent_id: str | _Unset | None = UNSET,
        cascade: bool | _Unset = UNSET,
        cascade_for: Mapping[str, bool] | _Unset = UNSET,
        bypass: bool | _Unset = UNSET,
    ) -> Flow[Entity]:
        """Change the entity's name, parent or cascade (fields not given stay as they are;
        `parent_id=None` detaches it, which also turns cascade off). `cascade_for`
        replaces the per-resource choices whole ({} clears them); `bypass` turns the
        entity's bypass on or off."""
        return entities.update_entity(
            self.state, entity_id, name, parent_id, cascade, self.auditor(), cascade_for, bypass
        )

    @audited
    def set_parent(
        self,
        entity_id: str,
        parent_id: str,
        *,
        principal: str | None = None,
        reason: str | None = None,
    ) -> Flow[Entity]:
        """Move the entity under `parent_id` (its cascade choices stay): its acquires
        cascade to the new parent from then on. Audited as `set_parent` with `principal`
        (default: the client's) and `reason`; leases taken before the move settle with
        the buckets they took from (docs/controls.md)."""
        if not isinstance(parent_id, str):
            raise ValidationError(
                f"parent_id must be an entity id, got {parent_id!r} "
                "(to detach an entity, use update_entity(entity_id, parent_id=None))"
            )
        if reason is not None and not isinstance(reason, str):
            raise ValidationError(f"reason must be text, got {reason!r}")
        return entities.update_entity(
            self.state,
            entity_id,
            UNSET,
            parent_id,
            UNSET,
            self._operator(principal),
            why=("set_parent", reason),
        )

    def get_entity(self, entity_id: str) -> Flow[Entity | None]:
        """The entity, or None."""
        return entities.get_entity(self.state, entity_id)

    @audited
    def delete_entity(self, entity_id: str) -> Flow[int]:
        """Delete the entity with its limits, usage and bucket shards (refused with children)."""
        return entities.delete_entity(self.state, entity_id, self.auditor())

    def get_entities(self, entity_ids: Sequence[str]) -> Flow[list[Entity]]:
        """The entities that exist among `entity_ids`, in that order, in one read."""
        return entities.get_entities(self.state, entity_ids)

    def get_children(self, parent_id: str) -> Flow[list[Entity]]:
        """The entities whose parent is `parent_id`."""
        return entities.get_children(self.state, parent_id)

    def list_entities(self) -> Flow[list[str]]:
        """Ids of every entity in the namespace."""
        return entities.list_entities(self.state)

    # ------------------------------------------------------------ stored limits
    @audited
    def set_limits(
        self, entity_id: str, limits: Sequence[Limit], resource: str | None = None
    ) -> Flow[None]:
        """Store an entity's limits for one resource (or, without one, for every resource)."""
        return config.set_limits(
            self.state, entity_id, resource, limits, self.now(), self.auditor()
        )

    def get_limits(self, entity_id: str, resource: str | None = None) -> Flow[tuple[Limit, ...]]:
        """The limits stored at exactly this level (empty when none)."""
        return config.get_limits(self.state, entity_id, resource)

    @audited
    def delete_limits(self, entity_id: str, resource: str | None = None) -> Flow[bool]:
        """Delete the limits stored at this level; False when there were none."""
        return config.delete_limits(self.state, entity_id, resource, self.auditor())

    @audited
    def set_resource_defaults(self, resource: str, limits: Sequence[Limit]) -> Flow[None]:
        """Limits for every entity on `resource` that has none of its own."""
        return config.set_limits(self.state, None, resource, limits, self.now(), self.auditor())

    def get_resource_defaults(self, resource: str) -> Flow[tuple[Limit, ...]]:
        return config.get_limits(self.state, None, resource)

    @audited
    def delete_resource_defaults(self, resource: str) -> Flow[bool]:
        return config.delete_limits(self.state, None, resource, self.auditor())

    @audited
    def set_system_defaults(
        self, limits: Sequence[Limit], *, on_unavailable: FailurePolicy | None = None
    ) -> Flow[None]:
        """Store the system defaults; `on_unavailable` stores the failure policy with them
        (replacing the item: leaving it out clears a stored policy)."""
        return config.set_limits(
            self.state, None, None, limits, self.now(), self.auditor(), on_unavailable
        )

    def get_system_defaults(self) -> Flow[tuple[Limit, ...]]:
        return config.get_limits(self.state, None, None)

    @audited
    def delete_system_defaults(self) -> Flow[bool]:
        return config.delete_limits(self.state, None, None, self.auditor())

    @audited
    def set_bucket_ttl(
        self, seconds: int | None, *, entity_id: str | None = None, resource: str | None = None
    ) -> Flow[None]:
        """Store how long a full, idle bucket item is kept (seconds; 0: never expire;
        None: remove, deferring to the next level) for an entity and resource, an
        entity's every resource, a resource's entities, or (neither) every bucket.
        See docs/quotas.md, Idle buckets expire."""
        return bucket_ttl.set_bucket_ttl(
            self.state, entity_id, resource, seconds, self.now(), self.auditor()
        )

    def get_bucket_ttl(
        self, *, entity_id: str | None = None, resource: str | None = None
    ) -> Flow[int | None]:
        """The bucket TTL stored at exactly this level (None: none stored there)."""
        return bucket_ttl.get_bucket_ttl(self.state, entity_id, resource)

    def list_limit_levels(self) -> Flow[list[tuple[str | None, str | None]]]:
        """Every level that stores limits in the namespace, as (entity_id, resource):
        (E, None) is an entity default, (None, R) a resource default, (None, None) the
        system defaults."""
        return namespace.list_limit_levels(self.state)

    def get_failure_policy(self) -> Flow[FailurePolicy | None]:
        """The failure policy stored in the system defaults (read now)."""
        return config.get_failure_policy(self.state)

    def resolve_limits(self, entity_id: str, resource: str) -> Flow[ResolvedLimits | None]:
        """The limits an acquire would use, and the level they come from."""
        keys.validate_id("entity_id", entity_id)
        keys.validate_resource(resource)
        return self._resolve_one(entity_id, resource)

    def _resolve_one(self, entity_id: str, resource: str) -> Flow[ResolvedLimits | None]:
        found = yield from config.resolve(self.state, [(entity_id, resource)], self.now())
        return found[(entity_id, resource)]

    # ------------------------------------------------------------ reading buckets
    def available(
        self, entity_id: str, resource: str, *, limits: Sequence[Limit] | None = None
    ) -> Flow[dict[str, int]]:
        """Whole tokens available now per limit, summed over the bucket's shards."""
        return read.available(self.state, entity_id, resource, limits, self.now())

    def time_until_available(
        self,
        entity_id: str,
        resource: str,
        needed: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
    ) -> Flow[float]:
        """Seconds until `needed` tokens of every named limit are there (0 if they are)."""
        return read.time_until_available(
            self.state, entity_id, resource, needed, limits, self.now()
        )

    def get_shards(self, entity_id: str, resource: str) -> Flow[list[ShardInfo]]:
        """One `ShardInfo` per bucket shard of (entity, resource), from GSI3 + BatchGetItem."""
        return shards.get_shards(self.state, entity_id, resource, self.now())

    def list_resources(self, entity_id: str) -> Flow[list[str]]:
        """Resources the entity has buckets for."""
        return shards.list_resources(self.state, entity_id)

    # ------------------------------------------------------------ operator controls
    @audited
    def reset_bucket(
        self,
        entity_id: str,
        resource: str,
        *,
        principal: str | None = None,
        reason: str | None = None,
    ) -> Flow[int]:
        """Fill the entity's bucket for `resource`, every shard at once (tokens held by
        reserves stay held); returns the number of shards reset. Audited as
        `reset_bucket` with `principal` (default: the client's) and `reason`."""
        return controls.reset_bucket(
            self.state, entity_id, resource, self.now(), self._operator(principal), reason
        )

    @audited
    def top_up(
        self,
        entity_id: str,
        resource: str,
        amounts: Mapping[str, int],
        *,
        principal: str | None = None,
        reason: str | None = None,
    ) -> Flow[TopUp]:
        """Grant `amounts` (limit name -> whole tokens) once, split over the shards; the
        limits stay as they are. A bucket holds no more than its capacity: what does not
        fit is refused and reported. Audited as `top_up`."""
        return controls.top_up(
            self.state, entity_id, resource, amounts, self.now(), self._operator(principal), reason
        )

    # ------------------------------------------------------------ audit
    def get_audit_events(
        self,
        entity_id: str | None = None,
        *,
        since_ms: int = 0,
        limit: int | None = None,
        table_level: bool = False,
    ) -> Flow[list[AuditEvent]]:
        """Recorded configuration changes, oldest first: of one entity, or of the namespace
        (`table_level=True`: migrations and namespace deletions); the last `limit` only."""
        return audit_flows.get_audit_events(self.state, entity_id, since_ms, limit, table_level)

    # ------------------------------------------------------------ namespaces
    def list_namespaces(self) -> Flow[list[str]]:
        """The namespaces that hold items in the table (a Scan of the namespace index)."""
        return namespace.list_namespaces(self.state)

    def namespace_info(self, ns: str | None = None) -> Flow[NamespaceInfo]:
        """Counts of a namespace's items by kind (this limiter's namespace by default)."""
        return namespace.namespace_info(self.state, ns)

    @audited
    def delete_namespace(
        self,
        ns: str,
        *,
        wcu_per_second: int = DEFAULT_DELETE_WCU,
        on_progress: Progress | None = None,
    ) -> Flow[int]:
        """Delete every item of namespace `ns`, in batches paced to `wcu_per_second`.

        Resumable and idempotent: run it again after an interruption. Nothing outside the
        namespace is touched; a table-level audit event records the deletion."""
        return namespace.delete_namespace(
            self.state, ns, wcu_per_second, on_progress, self.auditor()
        )

    # ------------------------------------------------------------ usage
    def get_usage_snapshots(
        self,
        entity_id: str | None = None,
        resource: str | None = None,
        window: str | None = None,
        start: TimeArg = None,
        end: TimeArg = None,
    ) -> Flow[list[UsageSnapshot]]:
        """Usage snapshots written by the aggregator, filtered by every argument given."""
        return usage_flows.get_usage_snapshots(self.state, entity_id, resource, window, start, end)

    def get_usage_summary(
        self,
        entity_id: str | None = None,
        resource: str | None = None,
        window: str = DEFAULT_SUMMARY_WINDOW,
        start: TimeArg = None,
        end: TimeArg = None,
    ) -> Flow[UsageSummary]:
        """Totals per limit over the snapshots of one window kind."""
        return usage_flows.get_usage_summary(self.state, entity_id, resource, window, start, end)


class SyncFace(Protocol):
    """What a `sync_face` method needs of its object (a SyncRateLimiter)."""

    _ops: Operations
    repository: SyncRepository


class AsyncFace(Protocol):
    """What an `async_face` method needs of its object (a RateLimiter)."""

    _ops: Operations
    repository: Repository


def sync_face(
    op: Callable[Concatenate[Operations, P], Flow[T]],
) -> Callable[Concatenate[SyncFace, P], T]:
    """The operation as a SyncRateLimiter method: build the flow, run it on boto3."""

    needs_principal = getattr(op, "audited", False)

    def method(self: SyncFace, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if needs_principal:
            self.repository.ensure_principal()
        return self.repository.run(op(self._ops, *args, **kwargs))

    return _named(method, op)


def async_face(
    op: Callable[Concatenate[Operations, P], Flow[T]],
) -> Callable[Concatenate[AsyncFace, P], Coroutine[Any, Any, T]]:
    """The operation as a RateLimiter method: build the flow, await it on aiobotocore."""

    needs_principal = getattr(op, "audited", False)

    async def method(self: AsyncFace, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if needs_principal:
            await self.repository.ensure_principal()
        return await self.repository.run(op(self._ops, *args, **kwargs))

    return _named(method, op)


F = TypeVar("F", bound=Callable[..., Any])


def _named(method: F, op: Callable[..., Any]) -> F:
    method.__name__ = method.__qualname__ = op.__name__
    method.__doc__ = op.__doc__
    method.__wrapped__ = op  # type: ignore[attr-defined]  # help() and inspect show its signature
    return method
