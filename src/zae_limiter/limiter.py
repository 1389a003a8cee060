"""RateLimiter (async) and SyncRateLimiter: thin public faces over the flows.

Each method builds a flow with `_Flows` and hands it to its repository's driver, so the
two classes differ only in `await`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager

from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded
from zae_limiter.flows import Flow, config, entities, read, shards
from zae_limiter.flows import acquire as acquire_flow
from zae_limiter.flows import usage as usage_flows
from zae_limiter.flows.config import FailurePolicy, check_failure_policy, stored_failure_policy
from zae_limiter.flows.usage import DEFAULT_SUMMARY_WINDOW, TimeArg
from zae_limiter.lease import NOTHING, Lease, SyncLease
from zae_limiter.limits import Limit
from zae_limiter.models import Entity, ResolvedLimits, ShardInfo, UsageSnapshot, UsageSummary
from zae_limiter.repository import Repository, SyncRepository, _Base
from zae_limiter.stats import DecisionStats, LimiterStats, Outcome

log = logging.getLogger("zae_limiter")


class _Flows:
    """Builds the flow for each public method from its arguments."""

    def __init__(self, repo: _Base, speculative_writes: bool) -> None:
        self._repo = repo
        self.speculative_writes = speculative_writes

    @property
    def state(self):  # type: ignore[no-untyped-def]
        return self._repo.state

    def now(self) -> int:
        return self._repo.now_ms()

    def acquire(
        self,
        entity_id: str,
        resource: str,
        consume: Mapping[str, int],
        limits: Sequence[Limit] | None,
    ) -> Flow[acquire_flow.Acquired]:
        return acquire_flow.acquire(
            self.state, entity_id, resource, consume, limits, self.now(), self.speculative_writes
        )

    def set_system_defaults(
        self, limits: Sequence[Limit], on_unavailable: FailurePolicy | None
    ) -> Flow[None]:
        return config.set_limits(self.state, None, None, limits, self.now(), on_unavailable)

    def create_entity(
        self, entity_id: str, name: str | None, parent_id: str | None, cascade: bool
    ) -> Flow[Entity]:
        return entities.create_entity(self.state, entity_id, name, parent_id, cascade, self.now())

    def set_limits(
        self, entity_id: str | None, resource: str | None, limits: Sequence[Limit]
    ) -> Flow[None]:
        return config.set_limits(self.state, entity_id, resource, limits, self.now())

    def resolve_limits(self, entity_id: str, resource: str) -> Flow[ResolvedLimits | None]:
        keys.validate_id("entity_id", entity_id)
        keys.validate_resource(resource)

        def flow() -> Flow[ResolvedLimits | None]:
            found = yield from config.resolve(self.state, [(entity_id, resource)], self.now())
            return found[(entity_id, resource)]

        return flow()

    def available(
        self, entity_id: str, resource: str, limits: Sequence[Limit] | None
    ) -> Flow[dict[str, int]]:
        return read.available(self.state, entity_id, resource, limits, self.now())

    def time_until_available(
        self,
        entity_id: str,
        resource: str,
        needed: Mapping[str, int],
        limits: Sequence[Limit] | None,
    ) -> Flow[float]:
        return read.time_until_available(
            self.state, entity_id, resource, needed, limits, self.now()
        )


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

    def record(self, resource: str, outcome: Outcome, started: float) -> None:
        self.stats.record(resource, outcome, (self.timer() - started) * 1000)

    def degrade(
        self, error: Exception, resource: str, started: float, call: FailurePolicy | None
    ) -> Outcome:
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


class RateLimiter:
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
        self.repository = repository
        self._flows = _Flows(repository, speculative_writes)
        self._decisions = _Decisions(repository, on_unavailable, shadow)

    @property
    def stats(self) -> DecisionStats:
        return self._decisions.stats

    def get_stats(self) -> LimiterStats:
        """Decisions per resource (admitted, rejected, allowed on failure, shadow
        rejections, unavailable) and the acquire latency histogram."""
        return self._decisions.stats.snapshot()

    async def get_failure_policy(self) -> FailurePolicy | None:
        """The failure policy stored in the system defaults (read now)."""
        return await self.repository.run(config.get_failure_policy(self.repository.state))

    @asynccontextmanager
    async def acquire(
        self,
        entity_id: str,
        resource: str,
        consume: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
        on_unavailable: FailurePolicy | None = None,
    ) -> AsyncIterator[Lease]:
        repo, decisions = self.repository, self._decisions
        if on_unavailable is not None:
            check_failure_policy(on_unavailable)
        started = decisions.timer()
        flow = self._flows.acquire(entity_id, resource, consume, limits)
        outcome: Outcome = "admitted"
        try:
            acquired = await repo.run(flow, repo.timeout)
        except (RateLimitExceeded, RateLimiterUnavailable) as error:
            outcome = decisions.degrade(error, resource, started, on_unavailable)
            acquired = NOTHING
        decisions.record(resource, outcome, started)
        amounts = acquire_flow.validate_amounts("consume", consume)
        lease = Lease(repo, acquired, amounts, None if outcome == "admitted" else outcome)
        try:
            yield lease
        except BaseException:
            await lease._finish(failed=True)
            raise
        await lease._finish(failed=False)

    async def create_entity(
        self,
        entity_id: str,
        name: str | None = None,
        *,
        parent_id: str | None = None,
        cascade: bool = False,
    ) -> Entity:
        return await self.repository.run(
            self._flows.create_entity(entity_id, name, parent_id, cascade)
        )

    async def get_entity(self, entity_id: str) -> Entity | None:
        return await self.repository.run(entities.get_entity(self.repository.state, entity_id))

    async def delete_entity(self, entity_id: str) -> None:
        await self.repository.run(entities.delete_entity(self.repository.state, entity_id))

    async def get_children(self, parent_id: str) -> list[Entity]:
        return await self.repository.run(entities.get_children(self.repository.state, parent_id))

    async def list_entities(self) -> list[str]:
        return await self.repository.run(entities.list_entities(self.repository.state))

    async def set_limits(
        self, entity_id: str, limits: Sequence[Limit], resource: str | None = None
    ) -> None:
        await self.repository.run(self._flows.set_limits(entity_id, resource, limits))

    async def get_limits(self, entity_id: str, resource: str | None = None) -> tuple[Limit, ...]:
        return await self.repository.run(
            config.get_limits(self.repository.state, entity_id, resource)
        )

    async def delete_limits(self, entity_id: str, resource: str | None = None) -> None:
        await self.repository.run(config.delete_limits(self.repository.state, entity_id, resource))

    async def set_resource_defaults(self, resource: str, limits: Sequence[Limit]) -> None:
        await self.repository.run(self._flows.set_limits(None, resource, limits))

    async def get_resource_defaults(self, resource: str) -> tuple[Limit, ...]:
        return await self.repository.run(config.get_limits(self.repository.state, None, resource))

    async def delete_resource_defaults(self, resource: str) -> None:
        await self.repository.run(config.delete_limits(self.repository.state, None, resource))

    async def set_system_defaults(
        self, limits: Sequence[Limit], *, on_unavailable: FailurePolicy | None = None
    ) -> None:
        """Store the system defaults; `on_unavailable` stores the failure policy with them
        (replacing the item: leaving it out clears a stored policy)."""
        await self.repository.run(self._flows.set_system_defaults(limits, on_unavailable))

    async def get_system_defaults(self) -> tuple[Limit, ...]:
        return await self.repository.run(config.get_limits(self.repository.state, None, None))

    async def delete_system_defaults(self) -> None:
        await self.repository.run(config.delete_limits(self.repository.state, None, None))

    async def resolve_limits(self, entity_id: str, resource: str) -> ResolvedLimits | None:
        return await self.repository.run(self._flows.resolve_limits(entity_id, resource))

    async def available(
        self, entity_id: str, resource: str, *, limits: Sequence[Limit] | None = None
    ) -> dict[str, int]:
        return await self.repository.run(self._flows.available(entity_id, resource, limits))

    async def time_until_available(
        self,
        entity_id: str,
        resource: str,
        needed: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
    ) -> float:
        return await self.repository.run(
            self._flows.time_until_available(entity_id, resource, needed, limits)
        )

    async def get_shards(self, entity_id: str, resource: str) -> list[ShardInfo]:
        """One `ShardInfo` per bucket shard of (entity, resource), from GSI3 + BatchGetItem."""
        repo = self.repository
        return await repo.run(shards.get_shards(repo.state, entity_id, resource, repo.now_ms()))

    async def list_resources(self, entity_id: str) -> list[str]:
        return await self.repository.run(shards.list_resources(self.repository.state, entity_id))

    async def get_usage_snapshots(
        self,
        entity_id: str | None = None,
        resource: str | None = None,
        window: str | None = None,
        start: TimeArg = None,
        end: TimeArg = None,
    ) -> list[UsageSnapshot]:
        """Usage snapshots written by the aggregator, filtered by every argument given."""
        state = self.repository.state
        return await self.repository.run(
            usage_flows.get_usage_snapshots(state, entity_id, resource, window, start, end)
        )

    async def get_usage_summary(
        self,
        entity_id: str | None = None,
        resource: str | None = None,
        window: str = DEFAULT_SUMMARY_WINDOW,
        start: TimeArg = None,
        end: TimeArg = None,
    ) -> UsageSummary:
        """Totals per limit over the snapshots of one window kind."""
        state = self.repository.state
        return await self.repository.run(
            usage_flows.get_usage_summary(state, entity_id, resource, window, start, end)
        )


class SyncRateLimiter:
    """Sync rate limiter. `with limiter.acquire(...) as lease:` guards a call.

    Same options as `RateLimiter` (`on_unavailable`, `shadow`).
    """

    def __init__(
        self,
        repository: SyncRepository,
        *,
        speculative_writes: bool = True,
        on_unavailable: FailurePolicy | None = None,
        shadow: bool = False,
    ) -> None:
        self.repository = repository
        self._flows = _Flows(repository, speculative_writes)
        self._decisions = _Decisions(repository, on_unavailable, shadow)

    @property
    def stats(self) -> DecisionStats:
        return self._decisions.stats

    def get_stats(self) -> LimiterStats:
        """Decisions per resource and the acquire latency histogram (see RateLimiter)."""
        return self._decisions.stats.snapshot()

    def get_failure_policy(self) -> FailurePolicy | None:
        """The failure policy stored in the system defaults (read now)."""
        return self.repository.run(config.get_failure_policy(self.repository.state))

    @contextmanager
    def acquire(
        self,
        entity_id: str,
        resource: str,
        consume: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
        on_unavailable: FailurePolicy | None = None,
    ) -> Iterator[SyncLease]:
        repo, decisions = self.repository, self._decisions
        if on_unavailable is not None:
            check_failure_policy(on_unavailable)
        started = decisions.timer()
        flow = self._flows.acquire(entity_id, resource, consume, limits)
        outcome: Outcome = "admitted"
        try:
            acquired = repo.run(flow, repo.timeout)
        except (RateLimitExceeded, RateLimiterUnavailable) as error:
            outcome = decisions.degrade(error, resource, started, on_unavailable)
            acquired = NOTHING
        decisions.record(resource, outcome, started)
        amounts = acquire_flow.validate_amounts("consume", consume)
        lease = SyncLease(repo, acquired, amounts, None if outcome == "admitted" else outcome)
        try:
            yield lease
        except BaseException:
            lease._finish(failed=True)
            raise
        lease._finish(failed=False)

    def create_entity(
        self,
        entity_id: str,
        name: str | None = None,
        *,
        parent_id: str | None = None,
        cascade: bool = False,
    ) -> Entity:
        return self.repository.run(self._flows.create_entity(entity_id, name, parent_id, cascade))

    def get_entity(self, entity_id: str) -> Entity | None:
        return self.repository.run(entities.get_entity(self.repository.state, entity_id))

    def delete_entity(self, entity_id: str) -> None:
        self.repository.run(entities.delete_entity(self.repository.state, entity_id))

    def get_children(self, parent_id: str) -> list[Entity]:
        return self.repository.run(entities.get_children(self.repository.state, parent_id))

    def list_entities(self) -> list[str]:
        return self.repository.run(entities.list_entities(self.repository.state))

    def set_limits(
        self, entity_id: str, limits: Sequence[Limit], resource: str | None = None
    ) -> None:
        self.repository.run(self._flows.set_limits(entity_id, resource, limits))

    def get_limits(self, entity_id: str, resource: str | None = None) -> tuple[Limit, ...]:
        return self.repository.run(config.get_limits(self.repository.state, entity_id, resource))

    def delete_limits(self, entity_id: str, resource: str | None = None) -> None:
        self.repository.run(config.delete_limits(self.repository.state, entity_id, resource))

    def set_resource_defaults(self, resource: str, limits: Sequence[Limit]) -> None:
        self.repository.run(self._flows.set_limits(None, resource, limits))

    def get_resource_defaults(self, resource: str) -> tuple[Limit, ...]:
        return self.repository.run(config.get_limits(self.repository.state, None, resource))

    def delete_resource_defaults(self, resource: str) -> None:
        self.repository.run(config.delete_limits(self.repository.state, None, resource))

    def set_system_defaults(
        self, limits: Sequence[Limit], *, on_unavailable: FailurePolicy | None = None
    ) -> None:
        """Store the system defaults and, optionally, the failure policy (see RateLimiter)."""
        self.repository.run(self._flows.set_system_defaults(limits, on_unavailable))

    def get_system_defaults(self) -> tuple[Limit, ...]:
        return self.repository.run(config.get_limits(self.repository.state, None, None))

    def delete_system_defaults(self) -> None:
        self.repository.run(config.delete_limits(self.repository.state, None, None))

    def resolve_limits(self, entity_id: str, resource: str) -> ResolvedLimits | None:
        return self.repository.run(self._flows.resolve_limits(entity_id, resource))

    def available(
        self, entity_id: str, resource: str, *, limits: Sequence[Limit] | None = None
    ) -> dict[str, int]:
        return self.repository.run(self._flows.available(entity_id, resource, limits))

    def time_until_available(
        self,
        entity_id: str,
        resource: str,
        needed: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
    ) -> float:
        return self.repository.run(
            self._flows.time_until_available(entity_id, resource, needed, limits)
        )

    def get_shards(self, entity_id: str, resource: str) -> list[ShardInfo]:
        """One `ShardInfo` per bucket shard of (entity, resource), from GSI3 + BatchGetItem."""
        repo = self.repository
        return repo.run(shards.get_shards(repo.state, entity_id, resource, repo.now_ms()))

    def list_resources(self, entity_id: str) -> list[str]:
        return self.repository.run(shards.list_resources(self.repository.state, entity_id))

    def get_usage_snapshots(
        self,
        entity_id: str | None = None,
        resource: str | None = None,
        window: str | None = None,
        start: TimeArg = None,
        end: TimeArg = None,
    ) -> list[UsageSnapshot]:
        """Usage snapshots written by the aggregator, filtered by every argument given."""
        state = self.repository.state
        return self.repository.run(
            usage_flows.get_usage_snapshots(state, entity_id, resource, window, start, end)
        )

    def get_usage_summary(
        self,
        entity_id: str | None = None,
        resource: str | None = None,
        window: str = DEFAULT_SUMMARY_WINDOW,
        start: TimeArg = None,
        end: TimeArg = None,
    ) -> UsageSummary:
        """Totals per limit over the snapshots of one window kind."""
        state = self.repository.state
        return self.repository.run(
            usage_flows.get_usage_summary(state, entity_id, resource, window, start, end)
        )
