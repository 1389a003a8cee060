"""The deadline bound against real stalls, on both faces: a repository opened through a
`StallProxy` in front of a moto server, an acquire whose calls get no answer, and a
watchdog at the documented bound plus a small margin (both relative to the timeout).

The bodies are plain functions so that tests/mutants/ can run them on broken variants."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest

from tests.integration.stall import StallProxy
from zae_limiter import (
    Limit,
    RateLimiter,
    RateLimiterUnavailable,
    Repository,
    SyncRateLimiter,
    SyncRepository,
)

#: Refills one token in 864 s: the counts below stay exact on the wall clock.
RPD = Limit.per_day("rpd", 100)
#: The repository's timeout: read timeout 50% of it, connect 30% (docs/resilience.md).
TIMEOUT = 2.0
#: Documented: an acquire raises RateLimiterUnavailable within 2 x timeout.
BOUND = 2 * TIMEOUT
#: Scheduling slack on a busy machine, a fraction of the timeout (never absolute seconds).
MARGIN = 0.25 * TIMEOUT


class Face:
    """One face (sync or async) of a limiter opened through a stall proxy."""

    def __init__(self, kind: str, endpoint: str, table: str) -> None:
        self.kind = kind
        self.loop = asyncio.new_event_loop() if kind == "async" else None
        self.repos: list[Any] = []
        self.admin = self.limiter(endpoint, table, timeout=None, create=True)
        self.proxy = StallProxy(endpoint)
        self.stalled = self.limiter(self.proxy.url, table, timeout=TIMEOUT)

    def run(self, value: Any) -> Any:
        return value if self.loop is None else self.loop.run_until_complete(value)

    def limiter(self, url: str, table: str, timeout: float | None, create: bool = False) -> Any:
        options: dict[str, Any] = dict(
            name=table, endpoint_url=url, create_table=create, timeout=timeout, reserve=False
        )
        if self.loop is None:
            repo: Any = SyncRepository.open(**options)
            self.repos.append(repo)
            return SyncRateLimiter(repo, on_unavailable="block")
        repo = self.run(Repository.open(**options))
        self.repos.append(repo)
        return RateLimiter(repo, on_unavailable="block")

    def acquire(self, limiter: Any, entity: str, amount: int) -> None:
        if self.loop is None:
            with limiter.acquire(entity, "gpt-4", {"rpd": amount}):
                return

        async def attempt() -> None:
            async with limiter.acquire(entity, "gpt-4", {"rpd": amount}):
                return

        self.run(attempt())

    def available(self, entity: str) -> dict[str, int]:
        result: dict[str, int] = self.run(self.admin.available(entity, "gpt-4"))
        return result

    def bounded_acquire(self, entity: str) -> tuple[float, BaseException | None]:
        """(seconds taken, what it raised); fails the test at the bound plus the margin."""
        watchdog = BOUND + MARGIN
        if self.loop is None:
            return _in_thread(lambda: self.acquire(self.stalled, entity, 5), watchdog)

        async def watched() -> tuple[float, BaseException | None]:
            started = time.monotonic()
            try:
                async with asyncio.timeout(watchdog):
                    async with self.stalled.acquire(entity, "gpt-4", {"rpd": 5}):
                        pass
            except TimeoutError:
                pytest.fail(f"the async acquire was still running after {watchdog:.2f}s")
            except Exception as error:
                return time.monotonic() - started, error
            return time.monotonic() - started, None

        result: tuple[float, BaseException | None] = self.run(watched())
        return result

    def close(self) -> None:
        self.proxy.close()
        for repo in self.repos:
            with suppress(Exception):
                self.run(repo.close())
        if self.loop is not None:
            self.loop.close()


def _in_thread(work: Callable[[], None], watchdog: float) -> tuple[float, BaseException | None]:
    box: dict[str, Any] = {}

    def target() -> None:
        started = time.monotonic()
        try:
            work()
        except BaseException as error:
            box["error"] = error
        box["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(watchdog)
    if thread.is_alive():
        pytest.fail(f"the sync acquire was still running after {watchdog:.2f}s")
    return box["elapsed"], box.get("error")


@contextmanager
def face(kind: str, endpoint: str, table: str) -> Iterator[Face]:
    opened = Face(kind, endpoint, table)
    try:
        yield opened
    finally:
        opened.close()


def _check_unavailable_within_bound(elapsed: float, error: BaseException | None) -> None:
    assert isinstance(error, RateLimiterUnavailable), f"expected unavailable, got {error!r}"
    assert elapsed < BOUND + MARGIN


def first_call_stalls(kind: str, endpoint: str, table: str) -> None:
    """A fresh client's first call (the config read) never gets an answer."""
    with face(kind, endpoint, table) as f:
        f.run(f.admin.set_limits("key-1", [RPD], resource="gpt-4"))
        f.proxy.stall()
        _check_unavailable_within_bound(*f.bounded_acquire("key-1"))
        assert f.proxy.swallowed >= 1  # the stall was met, not some other failure
        assert f.available("key-1") == {"rpd": 100}


def take_stalls_after_warm_up(kind: str, endpoint: str, table: str) -> None:
    """A warm client's take never gets an answer (on a kept-alive connection)."""
    with face(kind, endpoint, table) as f:
        f.run(f.admin.set_limits("key-1", [RPD], resource="gpt-4"))
        f.acquire(f.stalled, "key-1", 1)  # relayed: warms caches and the connection
        f.proxy.stall()
        _check_unavailable_within_bound(*f.bounded_acquire("key-1"))
        assert f.proxy.swallowed >= 1
        # A take that stalled may or may not have been applied: never more than asked.
        assert f.available("key-1")["rpd"] in (99, 94)


def parent_stalls_child_given_back(kind: str, endpoint: str, table: str) -> None:
    """Cascade: the child is taken, the parent's write stalls, the child is given back;
    the give-back is the one extra round trip the bound allows for."""
    with face(kind, endpoint, table) as f:
        f.run(f.admin.create_entity("proj-1"))
        f.run(f.admin.create_entity("key-1", parent_id="proj-1", cascade=True))
        f.run(f.admin.set_resource_defaults("gpt-4", [RPD]))
        f.acquire(f.stalled, "key-1", 1)
        f.proxy.stall(b"proj-1")
        _check_unavailable_within_bound(*f.bounded_acquire("key-1"))
        assert f.proxy.swallowed >= 1
        assert f.available("key-1") == {"rpd": 99}  # given back
        assert f.available("proj-1")["rpd"] in (99, 94)


CASES = [first_call_stalls, take_stalls_after_warm_up, parent_stalls_child_given_back]
