"""Repository / SyncRepository: a DynamoDB client, a namespace and the client's caches.

Both run the same flows; only the driver differs (aiobotocore or boto3).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import AsyncExitStack, ExitStack
from typing import Any, NamedTuple, Self, TypeVar

from zae_limiter import identity, keys
from zae_limiter.capacity import (
    DEFAULT_MAX_WAIT,
    Admission,
    CapacityMeter,
    CapacityPolicy,
    CapacityStats,
    capacity_stats,
)
from zae_limiter.client_options import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from zae_limiter.client_options import LOCAL_TIMEOUT as LOCAL_TIMEOUT
from zae_limiter.client_options import client_kwargs as client_kwargs
from zae_limiter.client_options import is_local_endpoint as is_local_endpoint
from zae_limiter.client_options import resolve_timeout as resolve_timeout
from zae_limiter.clock_watch import ClockStats, wall_clock_ms
from zae_limiter.config_cache import ConfigCache
from zae_limiter.drivers import AsyncRunner, SyncRunner
from zae_limiter.errors import ValidationError
from zae_limiter.flows import Flow
from zae_limiter.flows.context import DEFAULT_MAX_SHARDS, DEFAULT_PARTITION_WCU, RepoState
from zae_limiter.flows.records.table import open_table
from zae_limiter.flows.records.version import VersionRecord
from zae_limiter.flows.reserves.book import ReserveBook, ReserveSettings, ReserveStats
from zae_limiter.limits import Limit
from zae_limiter.models import CacheStats
from zae_limiter.reserve_keeper import AsyncKeeper, SyncKeeper, due_returns

T = TypeVar("T")
Clock = Callable[[], int]
DEFAULT_TABLE = "zae-limiter"
#: How long audit events are kept unless `audit_retention_days` says otherwise.
DEFAULT_AUDIT_RETENTION_DAYS = 90


def _state(
    name: str,
    namespace: str | None,
    config_cache_ttl: float,
    partition_wcu: int,
    max_shards: int,
    reserve: bool | ReserveSettings = True,
    seed: int | str | None = None,
) -> RepoState:
    """The state a repository's flows share; `seed` seeds its generators (shard choices,
    and the jitter its reserve book draws from too; None: from the OS)."""
    keys.validate_id("table name", name)
    if isinstance(partition_wcu, bool) or not isinstance(partition_wcu, int) or partition_wcu < 1:
        raise ValidationError(
            f"partition_wcu must be a positive whole number, got {partition_wcu!r}"
        )
    if isinstance(max_shards, bool) or not isinstance(max_shards, int) or max_shards < 1:
        raise ValidationError(f"max_shards must be a positive whole number, got {max_shards!r}")
    if not isinstance(reserve, (bool, ReserveSettings)):
        raise ValidationError(
            f"reserve must be True, False or a ReserveSettings(...), got {reserve!r}"
        )
    settings = ReserveSettings() if reserve is True else reserve or None
    jitter = random.Random(None if seed is None else f"{seed}/jitter")
    return RepoState(
        table=name,
        namespace=keys.validate_namespace(namespace),
        config_cache=ConfigCache[tuple[Limit, ...]](config_cache_ttl),
        partition_wcu=partition_wcu,
        max_shards=max_shards,
        reserves=None if settings is None else ReserveBook(settings, jitter),
        rng=random.Random(seed),
        jitter=jitter,
    )


def _admission(capacity: CapacityPolicy | None, max_wait: float) -> Admission | None:
    return None if capacity is None else Admission(capacity, max_wait)


class _Opening(NamedTuple):
    """What both faces' `open` derive from their (identical) arguments before any I/O."""

    timeout: float
    state: RepoState
    client_kwargs: dict[str, Any]
    admission: Admission | None


def _opening(
    namespace: str | None,
    name: str,
    region: str | None,
    endpoint_url: str | None,
    reserve: bool | ReserveSettings,
    sizes: tuple[float, int, int],
    capacity: tuple[CapacityPolicy | None, float],
    timeout: float | None,
) -> _Opening:
    """Validate and resolve `open`'s arguments; `sizes` is (config_cache_ttl,
    partition_wcu, max_shards) and `capacity` is (capacity, max_wait)."""
    resolved = resolve_timeout(timeout, endpoint_url)
    state = _state(name, namespace, *sizes, reserve)
    kwargs = client_kwargs(region, endpoint_url, resolved)
    return _Opening(resolved, state, kwargs, _admission(*capacity))


class _Base:
    def __init__(
        self,
        state: RepoState,
        meter: CapacityMeter,
        clock: Clock,
        admission: Admission | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.state = state
        self.meter = meter
        self.clock = clock
        #: Admission control over this client's own capacity (None: unlimited).
        self.admission = admission
        #: Seconds an acquire may take before it fails with RateLimiterUnavailable.
        self.timeout = timeout
        #: The table's version record, read once when the repository opened.
        self.schema: VersionRecord | None = None
        #: Who audit events name: given to open(), else asked of STS on the first change.
        self.principal: str | None = None
        #: Days an audit event is kept (DynamoDB TTL); None keeps them for ever.
        self.audit_retention_days: int | None = DEFAULT_AUDIT_RETENTION_DAYS
        #: Region and endpoint of the client, for the STS call.
        self.where: tuple[str | None, str | None] = (None, None)
        #: Returns token reserves when due (None: reserves off).
        self._keeper: AsyncKeeper | SyncKeeper | None = None

    def audit_settings(
        self, principal: str | None, retention_days: int | None, kwargs: dict[str, Any]
    ) -> None:
        if principal is not None and (not isinstance(principal, str) or not principal.strip()):
            raise ValidationError(f"principal must be a non-empty string, got {principal!r}")
        if retention_days is not None and (
            isinstance(retention_days, bool)
            or not isinstance(retention_days, int)
            or retention_days < 1
        ):
            raise ValidationError(
                "audit_retention_days must be a positive whole number of days (or None to "
                f"keep audit events for ever), got {retention_days!r}"
            )
        self.principal = principal
        self.audit_retention_days = retention_days
        self.where = (kwargs.get("region_name"), kwargs.get("endpoint_url"))

    @property
    def table_name(self) -> str:
        return self.state.table

    @property
    def namespace(self) -> str:
        return self.state.namespace

    def now_ms(self) -> int:
        return self.clock()

    def get_cache_stats(self) -> CacheStats:
        return self.state.config_cache.stats()

    def get_reserve_stats(self) -> ReserveStats:
        """Token reserves in this client: hits (acquires served from memory), takes
        (reserve writes), returns, reserves lost, and whole tokens held now per limit."""
        book = self.state.reserves
        return ReserveStats() if book is None else book.snapshot()

    def get_capacity_stats(self) -> CapacityStats:
        """Capacity consumed, throttles seen, and admission waits and refusals."""
        return capacity_stats(self.meter, self.admission, self.clock())

    def get_clock_stats(self) -> ClockStats:
        """This client's clock against DynamoDB's, from the `Date` header of the answers it
        got: the offset (ours minus DynamoDB's) lies in `[low_ms, high_ms]`. A warning is
        logged once when it is surely past `clock_watch.WARN_AFTER_MS` (see docs/doctor.md)."""
        runner: AsyncRunner | SyncRunner = self._runner  # type: ignore[attr-defined]
        return runner.watch.stats()

    def tend_reserves(self) -> None:
        """After an acquire: a reserve may be held, so its keeper must be running. A
        keeper that is watching the book is left alone without a call: this runs on
        every reserve hit."""
        keeper = self._keeper
        if keeper is None or keeper.watching:
            return
        book = self.state.reserves
        if book is not None and book.busy:
            keeper.poke()


async def _async_client(stack: AsyncExitStack, kwargs: dict[str, Any]) -> Any:
    """A DynamoDB client of the repository's own, closed with it."""
    from aiobotocore.session import get_session

    return await stack.enter_async_context(get_session().create_client("dynamodb", **kwargs))


def _sync_client(stack: ExitStack, kwargs: dict[str, Any]) -> Any:
    """A DynamoDB client of the repository's own (boto3's closes when collected)."""
    import boto3

    return boto3.session.Session().client("dynamodb", **kwargs)


def _async_keeper(repo: _AsyncFace, kwargs: dict[str, Any]) -> AsyncKeeper:
    # At interpreter exit the event loop is gone: the keeper returns reserves on boto3.
    return AsyncKeeper(repo, kwargs)


def _sync_keeper(repo: _SyncFace, kwargs: dict[str, Any]) -> SyncKeeper:
    # The exit hook holds the runner, never the repository (collected unclosed).
    runner, limit = repo._runner, repo.timeout
    return SyncKeeper(repo, lambda flow: runner.run(flow, limit, cleanup=True))


# unasync: source
class _AsyncFace(_Base):
    """What `Repository` does: open, then run flows through its runner."""

    _runner: AsyncRunner
    _keeper: AsyncKeeper | None

    def __init__(
        self,
        state: RepoState,
        client: Any,
        stack: AsyncExitStack,
        clock: Clock,
        admission: Admission | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        meter = CapacityMeter()
        super().__init__(state, meter, clock, admission, timeout)
        self._runner = AsyncRunner(client, meter, state.table, admission, clock, timeout)
        #: What closing releases: the runner, and a client this repository made.
        self._stack = stack

    @classmethod
    async def open(
        cls,
        namespace: str | None = None,
        *,
        name: str = DEFAULT_TABLE,
        region: str | None = None,
        endpoint_url: str | None = None,
        config_cache_ttl: float = 60,
        create_table: bool = False,
        partition_wcu: int = DEFAULT_PARTITION_WCU,
        max_shards: int = DEFAULT_MAX_SHARDS,
        clock: Clock | None = None,
        client: Any = None,
        check_schema: bool = True,
        capacity: CapacityPolicy | None = None,
        timeout: float | None = None,
        max_wait: float = DEFAULT_MAX_WAIT,
        lean: bool = True,
        principal: str | None = None,
        audit_retention_days: int | None = DEFAULT_AUDIT_RETENTION_DAYS,
        reserve: bool | ReserveSettings = True,
    ) -> Self:
        """Open the table (creating it when asked); `client`: a DynamoDB client of your
        own, on aiobotocore (this repository does not close it)."""
        sizes = (config_cache_ttl, partition_wcu, max_shards)
        opening = _opening(
            namespace, name, region, endpoint_url, reserve, sizes, (capacity, max_wait), timeout
        )
        timeout, state, kwargs, admission = opening
        stack = AsyncExitStack()
        if client is None:
            client = await _async_client(stack, kwargs)
        repo = cls(state, client, stack, clock or wall_clock_ms, admission, timeout)
        if state.reserves is not None:
            repo._keeper = _async_keeper(repo, kwargs)
        repo._runner.borrow(client, lean=lean, asynchronous=True)
        stack.callback(repo._runner.close)
        try:
            repo.audit_settings(principal, audit_retention_days, kwargs)
            repo.schema = await repo.run(
                open_table(state, create_table, repo.now_ms(), check_schema)
            )
        except BaseException:
            # Closing stops the keeper (and its interpreter-exit hook) and the runner.
            await repo.close()
            raise
        return repo

    @property
    def client(self) -> Any:
        """The aiobotocore client (e.g. to register botocore event handlers)."""
        return self._runner.client

    async def run(self, flow: Flow[T], timeout: float | None = None, cleanup: bool = False) -> T:
        """Run a flow; `timeout` bounds it (wall clock), `cleanup` marks it as giving back."""
        return await self._runner.run(flow, timeout, cleanup)

    async def ensure_principal(self) -> str:
        """The principal audit events name (STS is asked once, on the first change)."""
        if self.principal is None:
            self.principal = await identity.async_principal(*self.where)
        return self.principal

    async def invalidate_config_cache(self) -> None:
        self.state.config_cache.clear()

    async def return_reserves(self, everything: bool = True) -> None:
        """Write back this client's token reserves now: all of them, or those due."""
        flow = due_returns(self, everything)
        if flow is not None:
            await self.run(flow, self.timeout, cleanup=True)

    async def close(self) -> None:
        """Return every token reserve, then close the client."""
        if self.state.shares is not None:
            await self.state.shares.aclose()  # global limits' keepers end
        try:
            if self._keeper is not None:
                await self._keeper.close()
        finally:
            await self._release()

    async def _release(self) -> None:
        await self._stack.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# unasync: generated from the source above by tools/unasync.py; do not edit
class _SyncFace(_Base):
    """What `SyncRepository` does: open, then run flows through its runner."""

    _runner: SyncRunner
    _keeper: SyncKeeper | None

    def __init__(
        self,
        state: RepoState,
        client: Any,
        stack: ExitStack,
        clock: Clock,
        admission: Admission | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        meter = CapacityMeter()
        super().__init__(state, meter, clock, admission, timeout)
        self._runner = SyncRunner(client, meter, state.table, admission, clock, timeout)
        #: What closing releases: the runner, and a client this repository made.
        self._stack = stack

    @classmethod
    def open(
        cls,
        namespace: str | None = None,
        *,
        name: str = DEFAULT_TABLE,
        region: str | None = None,
        endpoint_url: str | None = None,
        config_cache_ttl: float = 60,
        create_table: bool = False,
        partition_wcu: int = DEFAULT_PARTITION_WCU,
        max_shards: int = DEFAULT_MAX_SHARDS,
        clock: Clock | None = None,
        client: Any = None,
        check_schema: bool = True,
        capacity: CapacityPolicy | None = None,
        timeout: float | None = None,
        max_wait: float = DEFAULT_MAX_WAIT,
        lean: bool = True,
        principal: str | None = None,
        audit_retention_days: int | None = DEFAULT_AUDIT_RETENTION_DAYS,
        reserve: bool | ReserveSettings = True,
    ) -> Self:
        """Open the table (creating it when asked); `client`: a DynamoDB client of your
        own, on boto3 (this repository does not close it)."""
        sizes = (config_cache_ttl, partition_wcu, max_shards)
        opening = _opening(
            namespace, name, region, endpoint_url, reserve, sizes, (capacity, max_wait), timeout
        )
        timeout, state, kwargs, admission = opening
        stack = ExitStack()
        if client is None:
            client = _sync_client(stack, kwargs)
        repo = cls(state, client, stack, clock or wall_clock_ms, admission, timeout)
        if state.reserves is not None:
            repo._keeper = _sync_keeper(repo, kwargs)
        repo._runner.borrow(client, lean=lean, asynchronous=False)
        stack.callback(repo._runner.close)
        try:
            repo.audit_settings(principal, audit_retention_days, kwargs)
            repo.schema = repo.run(
                open_table(state, create_table, repo.now_ms(), check_schema)
            )
        except BaseException:
            # Closing stops the keeper (and its interpreter-exit hook) and the runner.
            repo.close()
            raise
        return repo

    @property
    def client(self) -> Any:
        """The boto3 client (e.g. to register botocore event handlers)."""
        return self._runner.client

    def run(self, flow: Flow[T], timeout: float | None = None, cleanup: bool = False) -> T:
        """Run a flow; `timeout` bounds it (wall clock), `cleanup` marks it as giving back."""
        return self._runner.run(flow, timeout, cleanup)

    def ensure_principal(self) -> str:
        """The principal audit events name (STS is asked once, on the first change)."""
        if self.principal is None:
            self.principal = identity.sync_principal(*self.where)
        return self.principal

    def invalidate_config_cache(self) -> None:
        self.state.config_cache.clear()

    def return_reserves(self, everything: bool = True) -> None:
        """Write back this client's token reserves now: all of them, or those due."""
        flow = due_returns(self, everything)
        if flow is not None:
            self.run(flow, self.timeout, cleanup=True)

    def close(self) -> None:
        """Return every token reserve, then close the client."""
        if self.state.shares is not None:
            self.state.shares.close()  # global limits' keepers end
        try:
            if self._keeper is not None:
                self._keeper.close()
        finally:
            self._release()

    def _release(self) -> None:
        self._stack.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# unasync: end


class Repository(_AsyncFace):
    """Async repository on aiobotocore. Open with `await Repository.open(...)`."""


class SyncRepository(_SyncFace):
    """Sync repository on boto3. Open with `SyncRepository.open(...)`."""
