"""Repository / SyncRepository: a DynamoDB client, a namespace and the client's caches.

Both run the same flows; only the driver differs (aiobotocore or boto3).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from zae_limiter import keys
from zae_limiter.capacity import CapacityMeter
from zae_limiter.config_cache import ConfigCache
from zae_limiter.drivers import AsyncRunner, SyncRunner
from zae_limiter.flows import Flow
from zae_limiter.flows.context import DEFAULT_PARTITION_WCU, RepoState
from zae_limiter.flows.table import ensure_table
from zae_limiter.flows.version import VersionRecord, check_version
from zae_limiter.limits import Limit
from zae_limiter.models import CacheStats

T = TypeVar("T")
Clock = Callable[[], int]
DEFAULT_TABLE = "zae-limiter"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def client_kwargs(region: str | None, endpoint_url: str | None) -> dict[str, Any]:
    """Arguments for a DynamoDB client; local endpoints need a region and no account routing."""
    from botocore.config import Config

    endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    options: dict[str, Any] = {
        "connect_timeout": 2,
        "read_timeout": 5,
        "retries": {"max_attempts": 2, "mode": "standard"},
        "max_pool_connections": 32,
    }
    if endpoint:
        options["account_id_endpoint_mode"] = "disabled"
        region = region or "us-east-1"
    kwargs: dict[str, Any] = {"config": Config(**options)}
    if region:
        kwargs["region_name"] = region
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    return kwargs


def _state(
    name: str, namespace: str | None, config_cache_ttl: float, partition_wcu: int
) -> RepoState:
    keys.validate_id("table name", name)
    return RepoState(
        table=name,
        namespace=keys.validate_namespace(namespace),
        config_cache=ConfigCache[tuple[Limit, ...]](config_cache_ttl),
        partition_wcu=partition_wcu,
    )


class _Base:
    def __init__(self, state: RepoState, meter: CapacityMeter, clock: Clock) -> None:
        self.state = state
        self.meter = meter
        self.clock = clock
        #: The table's version record, read once when the repository opened.
        self.schema: VersionRecord | None = None

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


class Repository(_Base):
    """Async repository on aiobotocore. Open with `await Repository.open(...)`."""

    def __init__(self, state: RepoState, client: Any, stack: AsyncExitStack, clock: Clock) -> None:
        meter = CapacityMeter()
        super().__init__(state, meter, clock)
        self._runner = AsyncRunner(client, meter, state.table)
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
        clock: Clock | None = None,
        check_schema: bool = True,
    ) -> Repository:
        from aiobotocore.session import get_session

        state = _state(name, namespace, config_cache_ttl, partition_wcu)
        stack = AsyncExitStack()
        client = await stack.enter_async_context(
            get_session().create_client("dynamodb", **client_kwargs(region, endpoint_url))
        )
        repo = cls(state, client, stack, clock or wall_clock_ms)
        try:
            await repo.run(ensure_table(state, create_table))
            if check_schema:
                repo.schema = await repo.run(check_version(state))
        except BaseException:
            await stack.aclose()
            raise
        return repo

    async def run(self, flow: Flow[T]) -> T:
        return await self._runner.run(flow)

    async def invalidate_config_cache(self) -> None:
        self.state.config_cache.clear()

    async def close(self) -> None:
        await self._stack.aclose()

    async def __aenter__(self) -> Repository:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SyncRepository(_Base):
    """Sync repository on boto3. Open with `SyncRepository.open(...)`."""

    def __init__(self, state: RepoState, client: Any, clock: Clock) -> None:
        meter = CapacityMeter()
        super().__init__(state, meter, clock)
        self._runner = SyncRunner(client, meter, state.table)

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
        clock: Clock | None = None,
        client: Any = None,
        check_schema: bool = True,
    ) -> SyncRepository:
        import boto3

        state = _state(name, namespace, config_cache_ttl, partition_wcu)
        if client is None:
            client = boto3.session.Session().client(
                "dynamodb", **client_kwargs(region, endpoint_url)
            )
        repo = cls(state, client, clock or wall_clock_ms)
        try:
            repo.run(ensure_table(state, create_table))
            if check_schema:
                repo.schema = repo.run(check_version(state))
        except BaseException:
            repo.close()
            raise
        return repo

    def run(self, flow: Flow[T]) -> T:
        return self._runner.run(flow)

    def invalidate_config_cache(self) -> None:
        self.state.config_cache.clear()

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> SyncRepository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
