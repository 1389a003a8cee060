"""Shared fixtures: AWS-free credentials, moto (in-process and over HTTP), a clock."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# A skip is an error when ZAEL_REQUIRE_ENGINES=1 (CI): see tests/_require_engines.py.
from tests._require_engines import (  # noqa: F401  (pytest hooks, found by name)
    pytest_make_collect_report,
    pytest_runtest_makereport,
)

os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_REGION="us-east-1",
    AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
)
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist hands its workers COLUMNS (the controller's width, 80 off a terminal);
    # the CLI takes COLUMNS as the user's choice of width, so a worker would draw tables
    # as no user without it sees them. Tests that need a width set their own.
    os.environ.pop("COLUMNS", None)


class Tables:
    """Where a test's tables live: in-process moto (no endpoint, inside `mock_aws`) or an
    engine on loopback, so one test body runs on both (the `tables` fixture; an engine
    module overrides it with its endpoint)."""

    def __init__(self, endpoint_url: str | None) -> None:
        self.endpoint_url = endpoint_url

    def open(self, name: str, **kwargs: Any) -> Any:
        from zae_limiter import SyncRepository

        return SyncRepository.open(name=name, endpoint_url=self.endpoint_url, **kwargs)

    def client(self) -> Any:
        import boto3

        return boto3.client("dynamodb", region_name="us-east-1", endpoint_url=self.endpoint_url)


class Clock:
    """Milliseconds that only move when a test says so."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_http() -> Iterator[str]:
    """A moto server on loopback for aiobotocore (which cannot use in-process moto)."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def table_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def tables() -> Iterator[Tables]:
    """Tables in in-process moto; `tests/engine/` modules override it with DynamoDB Local."""
    from moto import mock_aws

    with mock_aws():
        yield Tables(None)


class Api:
    """One test body for both faces: async calls are run to completion on a private loop."""

    def __init__(self, limiter: Any, repo: Any, loop: asyncio.AbstractEventLoop | None) -> None:
        self.limiter = limiter
        self.repo = repo
        self.loop = loop
        self.kind = "sync" if loop is None else "async"

    def run(self, value: Any) -> Any:
        return value if self.loop is None else self.loop.run_until_complete(value)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.limiter, name)
        return lambda *args, **kwargs: self.run(method(*args, **kwargs))

    @contextmanager
    def acquire(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        manager = self.limiter.acquire(*args, **kwargs)
        if self.loop is None:
            with manager as lease:
                yield lease
            return
        lease = self.run(manager.__aenter__())
        try:
            yield _SyncView(lease, self)
        except BaseException as error:
            self.run(manager.__aexit__(type(error), error, error.__traceback__))
            raise
        self.run(manager.__aexit__(None, None, None))

    def meter(self) -> Any:
        return self.repo.meter.measure()

    def new_client(self, **options: Any) -> Api:
        """A second client on the same table (its own caches)."""
        return self._factory(**options)

    _factory: Callable[..., Api]


class _SyncView:
    def __init__(self, lease: Any, api: Api) -> None:
        self._lease, self._api = lease, api

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._lease, name)
        if callable(attr):
            return lambda *a, **k: self._api.run(attr(*a, **k))
        return attr


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest, table_name: str, clock: Clock) -> Iterator[Api]:
    """A limiter on a fresh table: sync on in-process moto, async on a moto server."""
    from zae_limiter import RateLimiter, Repository, SyncRateLimiter, SyncRepository

    opened: list[Any] = []
    if request.param == "sync":
        from moto import mock_aws

        with mock_aws():

            def make_sync(**options: Any) -> Api:
                speculative = options.pop("speculative_writes", True)
                repo = SyncRepository.open(
                    name=table_name, create_table=True, clock=clock, **options
                )
                opened.append(repo)
                return Api(SyncRateLimiter(repo, speculative_writes=speculative), repo, None)

            api = make_sync()
            api._factory = make_sync
            yield api
            for repo in opened:
                repo.close()
        return
    endpoint = request.getfixturevalue("moto_http")
    loop = asyncio.new_event_loop()

    def make_async(**options: Any) -> Api:
        speculative = options.pop("speculative_writes", True)
        repo = loop.run_until_complete(
            Repository.open(
                name=table_name, endpoint_url=endpoint, create_table=True, clock=clock, **options
            )
        )
        opened.append(repo)
        return Api(RateLimiter(repo, speculative_writes=speculative), repo, loop)

    api = make_async()
    api._factory = make_async
    yield api
    for repo in opened:
        loop.run_until_complete(repo.close())
    loop.close()


@pytest.fixture(autouse=True)
def _patient_default_deadline(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process moto answers on AWS's own endpoint names, so a client opened there without a
    timeout gets the 1 s deadline meant for DynamoDB; a busy CI machine stalls a first call
    past it. Give every test the local engines' deadline unless it checks the AWS default."""
    if request.node.get_closest_marker("aws_deadline") is None:
        from zae_limiter import client_options

        monkeypatch.setattr(client_options, "DEFAULT_TIMEOUT", client_options.LOCAL_TIMEOUT)


@pytest.fixture(scope="session", autouse=True)
def _quiet_exit_returns() -> Iterator[None]:
    """Repositories some tests leave open under in-process moto return their token
    reserves at interpreter exit, when moto is gone: that warning is noise here."""
    import logging

    yield
    logging.getLogger("zae_limiter").setLevel(logging.ERROR)
