"""The async and sync faces are one API: each pair has the same public methods with the
same parameters (the async one awaits where the sync one blocks), so neither can drift.
Pairs written once are generated (tools/unasync, checked by tests/unit/test_unasync.py);
the pairs that cannot be (the lean transports: blocking sockets against asyncio) and the
third face, Locust's session, are held to the same parameters here.
And `Repository.open(client=...)` works as `SyncRepository.open(client=...)` does."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools import unasync
from zae_limiter import (
    Lease,
    Limit,
    RateLimiter,
    Repository,
    SyncLease,
    SyncRateLimiter,
    SyncRepository,
    identity,
    operations,
)
from zae_limiter.drivers import AsyncRunner, SyncRunner
from zae_limiter.reserve_keeper import AsyncKeeper, SyncKeeper
from zae_limiter.wire.async_transport import AsyncTransport
from zae_limiter.wire.client import AsyncLeanClient, SyncLeanClient
from zae_limiter.wire.transport import SyncTransport

# The async face's context manager methods and their sync names.
_DUNDERS = {"__aenter__": "__enter__", "__aexit__": "__exit__"}
#: Where the faces differ on purpose: the async lean call takes a deadline its event loop
#: enforces (a blocking socket has its own timeouts), and only its exchange needs it.
_ASYNC_ONLY_PARAMETERS = {
    (AsyncLeanClient, "call"): {"deadline"},
    (AsyncLeanClient, "exchange"): {"deadline"},
    (AsyncTransport, "send"): {"deadline"},
}
PAIRS = [
    (Repository, SyncRepository),
    (RateLimiter, SyncRateLimiter),
    (Lease, SyncLease),
    (AsyncRunner, SyncRunner),
    (AsyncLeanClient, SyncLeanClient),
    (AsyncTransport, SyncTransport),
    (AsyncKeeper, SyncKeeper),
]
#: Functions with an async and a sync form.
FUNCTION_PAIRS = [
    (identity.async_principal, identity.sync_principal),
    (operations.async_face, operations.sync_face),
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


@pytest.mark.parametrize(("async_form", "sync_form"), FUNCTION_PAIRS, ids=lambda f: f.__name__)
def test_the_function_pairs_take_the_same_parameters(async_form: Any, sync_form: Any) -> None:
    assert _parameters(type(None), "", async_form) == _parameters(type(None), "", sync_form)


def _without_label(parameters: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """A Locust session's parameters less its own: `name`, the label of its statistics
    (where the limiter's method has no `name` of its own)."""
    return [p for p in parameters if (p[0], p[1]) != ("name", inspect.Parameter.KEYWORD_ONLY)]


def locust_drift(revert_available: bool = False) -> list[str]:
    """The methods of Locust's session whose parameters are not the limiter's. Run in a
    subprocess: importing Locust monkey-patches the standard library (gevent).
    `revert_available`: with the session's `available` as it was, without `limits=`
    (the drift this test was written for: it must be found)."""
    from zae_limiter.locust import AVAILABLE, RateLimiterSession

    if revert_available:

        def available(
            self: Any, entity_id: str, resource: str, *, name: str | None = None
        ) -> dict[str, int]:
            return self.timed(  # type: ignore[no-any-return]
                AVAILABLE, name or resource, lambda: self.limiter.available(entity_id, resource)
            )

        RateLimiterSession.available = available  # type: ignore[method-assign]
    limiter = _methods(SyncRateLimiter)
    shared = sorted(set(_methods(RateLimiterSession)) & set(limiter))
    assert "acquire" in shared and "available" in shared, shared
    return [
        name
        for name in shared
        if _without_label(_parameters(RateLimiterSession, name, getattr(RateLimiterSession, name)))
        != _parameters(SyncRateLimiter, name, limiter[name])
    ]


def _locust_drift_in_a_subprocess(revert_available: bool) -> list[str]:
    code = (
        # Locust first: it patches the standard library before anything else imports it.
        "import locust; from tests.integration.test_faces import locust_drift; "
        f"print(locust_drift({revert_available}))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_locust_session_takes_the_limiters_parameters() -> None:
    assert _locust_drift_in_a_subprocess(revert_available=False) == []


def test_the_locust_check_catches_a_session_that_drifted() -> None:
    assert _locust_drift_in_a_subprocess(revert_available=True) == ["available"]


def test_the_face_check_catches_a_drifted_pair() -> None:
    """A mutant: the sync limiter's `available` without `limits=`."""
    from tests.mutants import must_fail, mutant

    def available(self: Any, entity_id: str, resource: str) -> dict[str, int]:
        raise AssertionError("never called")

    check = test_the_faces_have_the_same_methods_and_parameters
    with mutant(SyncRateLimiter, "available", available):
        must_fail(check, RateLimiter, SyncRateLimiter)


def test_every_module_with_a_generated_face_is_checked() -> None:
    package = unasync.PACKAGE
    holding = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if unasync.SOURCE in path.read_text()
    }
    assert holding == set(unasync.FILES)


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
