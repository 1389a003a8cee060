"""Locust load tests for zae-limiter: `RateLimiterUser` and its `RateLimiterSession`.

    from locust import task
    from zae_limiter.locust import RateLimiterUser

    class MyUser(RateLimiterUser):
        @task
        def call_model(self) -> None:
            with self.client.acquire("user-1", "gpt-4", {"rpm": 1}, name="gpt-4"):
                pass

    locust -f locustfile.py --host my-table     # --host is the table name

Every call fires a Locust request event with its timing: ACQUIRE, COMMIT (a lease's
adjustments written at the end of the block), AVAILABLE and the management calls
(CREATE_ENTITY, SET_LIMITS, ...). `RateLimitExceeded` is its own request type,
RATE_LIMITED, and not a failure: the statistics separate infrastructure errors from
rate limiting. By default a rate-limited task then ends (`RescheduleTask`); set
`reschedule_on_rate_limit = False` to get the exception instead.

All users of a process share one `SyncRateLimiter` (boto3 clients are thread-safe), whose
connection pool is sized for the user count (`BOTO3_MAX_POOL` overrides it). The
endpoint comes from `endpoint_url` or `AWS_ENDPOINT_URL`, like every other client.
Needs Locust: `pip install 'zae-limiter[bench]'`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

try:
    from locust import User
    from locust.exception import RescheduleTask
except ImportError as missing:  # pragma: no cover - depends on the environment
    raise ImportError(
        "zae_limiter.locust needs Locust, which is not installed: "
        "pip install 'zae-limiter[bench]' (or pip install locust)"
    ) from missing

from zae_limiter.errors import RateLimitExceeded
from zae_limiter.flows.records.config import FailurePolicy
from zae_limiter.lease import SyncLease
from zae_limiter.limiter import SyncRateLimiter
from zae_limiter.limits import Limit
from zae_limiter.models import Entity
from zae_limiter.repository import DEFAULT_TABLE, SyncRepository, client_kwargs

T = TypeVar("T")

ACQUIRE = "ACQUIRE"
COMMIT = "COMMIT"
RATE_LIMITED = "RATE_LIMITED"
AVAILABLE = "AVAILABLE"
POOL_ENV = "BOTO3_MAX_POOL"
#: Connections per user: a cascade acquire writes child and parent at once.
CONNECTIONS_PER_USER = 2
MIN_POOL = 10
#: When the user count is unknown (a library-API run without options).
DEFAULT_POOL = 1000


def pool_size(users: int | None) -> int:
    """Connections for `users` concurrent users; `BOTO3_MAX_POOL` overrides."""
    override = os.environ.get(POOL_ENV)
    if override:
        return max(1, int(override))
    if not users:
        return DEFAULT_POOL
    return max(MIN_POOL, CONNECTIONS_PER_USER * users + MIN_POOL)


def target_users(environment: Any) -> int | None:
    """The user count of the run, from the command line or the runner, if known."""
    options = getattr(environment, "parsed_options", None)
    users = getattr(options, "num_users", None)
    if users:
        return int(users)
    runner = getattr(environment, "runner", None)
    count = getattr(runner, "target_user_count", None)
    return int(count) if count else None


class RateLimiterSession:
    """What `self.client` is: limiter calls that report themselves to Locust."""

    def __init__(
        self, limiter: SyncRateLimiter, environment: Any, reschedule_on_rate_limit: bool = True
    ) -> None:
        self.limiter = limiter
        self.environment = environment
        self.reschedule_on_rate_limit = reschedule_on_rate_limit

    def fire(
        self, request_type: str, name: str, started: float, exception: BaseException | None = None
    ) -> None:
        self.environment.events.request.fire(
            request_type=request_type,
            name=name,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=0,
            exception=exception,
            context={},
        )

    def timed(self, request_type: str, name: str, call: Callable[[], T]) -> T:
        """Run `call` and report it as `request_type` / `name` (failures included)."""
        started = time.perf_counter()
        try:
            result = call()
        except Exception as error:
            self.fire(request_type, name, started, error)
            raise
        self.fire(request_type, name, started)
        return result

    @contextmanager
    def acquire(
        self,
        entity_id: str,
        resource: str,
        consume: Mapping[str, int],
        *,
        limits: Sequence[Limit] | None = None,
        on_unavailable: FailurePolicy | None = None,
        name: str | None = None,
    ) -> Iterator[SyncLease]:
        """`limiter.acquire` reported as ACQUIRE (and COMMIT when the lease was adjusted)."""
        label = name or resource
        manager = self.limiter.acquire(
            entity_id, resource, consume, limits=limits, on_unavailable=on_unavailable
        )
        started = time.perf_counter()
        try:
            lease = manager.__enter__()
        except RateLimitExceeded as exceeded:
            self.fire(RATE_LIMITED, label, started)
            if self.reschedule_on_rate_limit:
                raise RescheduleTask() from exceeded
            raise
        except Exception as error:
            self.fire(ACQUIRE, label, started, error)
            raise
        self.fire(ACQUIRE, label, started)
        try:
            yield lease
        except BaseException as error:
            manager.__exit__(type(error), error, error.__traceback__)  # gives back, never swallows
            raise
        if lease.consumed != dict(consume):  # adjusted: the end of the block writes
            self.timed(COMMIT, label, lambda: manager.__exit__(None, None, None))
        else:
            manager.__exit__(None, None, None)

    # The calls below take the limiter's parameters, and `name` (the Locust label):
    # tests/integration/test_faces.py holds them to SyncRateLimiter's.
    def available(
        self,
        entity_id: str,
        resource: str,
        *,
        limits: Sequence[Limit] | None = None,
        name: str | None = None,
    ) -> dict[str, int]:
        return self.timed(
            AVAILABLE,
            name or resource,
            lambda: self.limiter.available(entity_id, resource, limits=limits),
        )

    def create_entity(
        self,
        entity_id: str,
        name: str | None = None,
        *,
        parent_id: str | None = None,
        cascade: bool = False,
        cascade_for: Mapping[str, bool] | None = None,
        bypass: bool = False,
    ) -> Entity:
        return self.timed(
            "CREATE_ENTITY",
            entity_id,
            lambda: self.limiter.create_entity(
                entity_id,
                name,
                parent_id=parent_id,
                cascade=cascade,
                cascade_for=cascade_for,
                bypass=bypass,
            ),
        )

    def set_limits(
        self, entity_id: str, limits: Sequence[Limit], resource: str | None = None
    ) -> None:
        self.timed(
            "SET_LIMITS", entity_id, lambda: self.limiter.set_limits(entity_id, limits, resource)
        )

    def set_resource_defaults(self, resource: str, limits: Sequence[Limit]) -> None:
        self.timed(
            "SET_RESOURCE_DEFAULTS",
            resource,
            lambda: self.limiter.set_resource_defaults(resource, limits),
        )

    def set_system_defaults(
        self, limits: Sequence[Limit], *, on_unavailable: FailurePolicy | None = None
    ) -> None:
        self.timed(
            "SET_SYSTEM_DEFAULTS",
            "system",
            lambda: self.limiter.set_system_defaults(limits, on_unavailable=on_unavailable),
        )

    def delete_entity(self, entity_id: str) -> None:
        self.timed("DELETE_ENTITY", entity_id, lambda: self.limiter.delete_entity(entity_id))


class RateLimiterUser(User):
    """A Locust user whose `client` is a `RateLimiterSession` on a shared limiter.

    Class attributes: `table_name` (default: Locust's `--host`, then `ZAE_LIMITER_TABLE`,
    then "zae-limiter"), `namespace`, `endpoint_url`, `region`, `create_table`,
    `speculative_writes`, `config_cache_ttl`, `partition_wcu`, `reschedule_on_rate_limit`. Override
    `setup_limits()` to create entities and limits: it runs once per process, when the
    shared limiter is opened.
    """

    abstract = True
    table_name: ClassVar[str | None] = None
    namespace: ClassVar[str | None] = None
    endpoint_url: ClassVar[str | None] = None
    region: ClassVar[str | None] = None
    create_table: ClassVar[bool] = False
    speculative_writes: ClassVar[bool] = True
    config_cache_ttl: ClassVar[float] = 60
    partition_wcu: ClassVar[int | None] = None
    reschedule_on_rate_limit: ClassVar[bool] = True

    _limiters: ClassVar[dict[tuple[Any, ...], SyncRateLimiter]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        limiter, is_new = self._shared_limiter(environment)
        self.client = RateLimiterSession(limiter, environment, self.reschedule_on_rate_limit)
        if is_new:
            self.setup_limits()

    def setup_limits(self) -> None:
        """Create entities and limits once per process; `self.client` is ready."""

    def _table(self) -> str:
        return self.table_name or self.host or os.environ.get("ZAE_LIMITER_TABLE") or DEFAULT_TABLE

    def _shared_limiter(self, environment: Any) -> tuple[SyncRateLimiter, bool]:
        endpoint = self.endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        key = (self._table(), self.namespace, endpoint, self.region, self.speculative_writes)
        with self._lock:
            found = self._limiters.get(key)
            if found is not None:
                return found, False
            limiter = open_limiter(
                self._table(),
                namespace=self.namespace,
                endpoint_url=endpoint,
                region=self.region,
                create_table=self.create_table,
                speculative_writes=self.speculative_writes,
                config_cache_ttl=self.config_cache_ttl,
                partition_wcu=self.partition_wcu,
                max_pool=pool_size(target_users(environment)),
            )
            self._limiters[key] = limiter
            return limiter, True

    @classmethod
    def close_all(cls) -> None:
        """Close every shared limiter (tests; Locust's process exit does it otherwise)."""
        with cls._lock:
            for limiter in cls._limiters.values():
                limiter.repository.close()
            cls._limiters.clear()


def open_limiter(
    table: str,
    *,
    namespace: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    create_table: bool = False,
    speculative_writes: bool = True,
    config_cache_ttl: float = 60,
    partition_wcu: int | None = None,
    max_pool: int = DEFAULT_POOL,
) -> SyncRateLimiter:
    """A `SyncRateLimiter` whose boto3 client has `max_pool` connections."""
    import boto3
    from botocore.config import Config

    kwargs = client_kwargs(region, endpoint_url)
    kwargs["config"] = kwargs["config"].merge(Config(max_pool_connections=max_pool))
    client = boto3.session.Session().client("dynamodb", **kwargs)
    extra: dict[str, Any] = {} if partition_wcu is None else {"partition_wcu": partition_wcu}
    repo = SyncRepository.open(
        namespace,
        name=table,
        endpoint_url=endpoint_url,
        region=region,
        create_table=create_table,
        config_cache_ttl=config_cache_ttl,
        client=client,
        **extra,
    )
    return SyncRateLimiter(repo, speculative_writes=speculative_writes)
