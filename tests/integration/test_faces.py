"""The async and sync faces are one API: each pair has the same public methods with the
same parameters (the async one awaits where the sync one blocks), so neither can drift.
And `Repository.open(client=...)` works as `SyncRepository.open(client=...)` does."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from zae_limiter import (
    Lease,
    Limit,
    RateLimiter,
    Repository,
    SyncLease,
    SyncRateLimiter,
    SyncRepository,
)
from zae_limiter.drivers import AsyncRunner, SyncRunner
from zae_limiter.wire.async_client import AsyncLeanClient
from zae_limiter.wire.sync_client import SyncLeanClient

# The async face's context manager methods and their sync names.
_DUNDERS = {"__aenter__": "__enter__", "__aexit__": "__exit__"}
#: Where the faces differ on purpose: the async lean call takes a deadline its event loop
#: enforces (a blocking socket has its own timeouts), and only its exchange needs it.
_ASYNC_ONLY_PARAMETERS = {
    (AsyncLeanClient, "call"): {"deadline"},
    (AsyncLeanClient, "exchange"): {"deadline"},
}
PAIRS = [
    (Repository, SyncRepository),
    (RateLimiter, SyncRateLimiter),
    (Lease, SyncLease),
    (AsyncRunner, SyncRunner),
    (AsyncLeanClient, SyncLeanClient),
]


def _methods(cls: type) -> dict[str, Any]:
    found = {}
    for name, value in inspect.getmembers(cls):
        if name.startswith("_") and name not in _DUNDERS.values() and name not in _DUNDERS:
            continue
        if name in ("__init__",) or isinstance(value, property) or not callable(value):
            continue
        found[_DUNDERS.get(name, name)] = value
    return found


def _parameters(cls: type, name: str, method: Any) -> list[tuple[str, Any, Any]]:
    skip = _ASYNC_ONLY_PARAMETERS.get((cls, name), set())
    raw = inspect.unwrap(method)
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(raw).parameters.values()
        if p.name not in skip
    ]


@pytest.mark.parametrize(("async_face", "sync_face"), PAIRS, ids=lambda c: c.__name__)
def test_the_faces_have_the_same_methods_and_parameters(async_face: type, sync_face: type) -> None:
    async_methods, sync_methods = _methods(async_face), _methods(sync_face)
    assert sorted(async_methods) == sorted(sync_methods)
    for name, method in async_methods.items():
        blocking = sync_methods[name]
        assert _parameters(async_face, name, method) == _parameters(sync_face, name, blocking), name
        if inspect.iscoroutinefunction(method):
            assert not inspect.iscoroutinefunction(blocking), name


def test_open_takes_the_same_arguments_on_both_faces() -> None:
    open_async = inspect.signature(Repository.open).parameters
    open_sync = inspect.signature(SyncRepository.open).parameters
    assert list(open_async.items()) == list(open_sync.items())


async def test_the_async_repository_opens_on_a_client_of_your_own(
    moto_http: str, table_name: str
) -> None:
    from aiobotocore.session import get_session

    kwargs = {
        "endpoint_url": moto_http,
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    async with get_session().create_client("dynamodb", **kwargs) as client:
        repo = await Repository.open(name=table_name, client=client, create_table=True)
        async with RateLimiter(repo) as limiter:
            await limiter.set_limits("acme", [Limit.per_minute("rpm", 10)])
            assert repo.client is client
            async with limiter.acquire("acme", "api", {"rpm": 1}) as lease:
                assert lease.consumed == {"rpm": 1}
        # The repository closed; the client is the caller's, and still works.
        listed = await client.list_tables()
        assert table_name in listed["TableNames"]


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_a_failed_open_leaves_no_exit_hook_behind(
    moto_http: str, table_name: str, face: str
) -> None:
    """A repository that failed to open holds no reserve, and nobody can close it: its
    keeper's interpreter-exit hook must go with it (the async face once left it)."""
    import gc

    from zae_limiter.errors import ZaeLimiterError
    from zae_limiter.reserve_keeper import _AtExit

    def exit_hooks() -> int:
        # Only the interpreter's exit registry keeps a hook alive once its keeper is gone.
        gc.collect()
        return sum(isinstance(o, _AtExit) for o in gc.get_objects())

    before = exit_hooks()
    with pytest.raises(ZaeLimiterError):  # no such table, and not asked to create it
        if face == "async":
            await Repository.open(name=table_name, endpoint_url=moto_http)
        else:
            SyncRepository.open(name=table_name, endpoint_url=moto_http)
    assert exit_hooks() == before
