"""Keepers: background work that returns a repository's token reserves when they are due.

A reserve goes back after `idle_ms` without an acquire or at `max_age_ms` (see
flows/reserves/book.py), whether or not the client makes another call: a sync repository runs a
daemon thread for it, an async one a task on its event loop, both started by the first
reserve and asleep while none is held. Closing returns everything; a repository that was
never closed returns its reserves at interpreter exit (the async face then uses a boto3
client of its own, since its event loop is gone by then).

A keeper knows its repository only through the small protocols below (its state, its
clock, how it runs a flow): the repository module imports this one, never the reverse.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from zae_limiter.flows import Flow
from zae_limiter.flows.reserves.ops import give_back_reserves

if TYPE_CHECKING:
    from zae_limiter.flows.context import RepoState

log = logging.getLogger("zae_limiter")
#: A keeper looks at the book at least this often (s), whatever the repository's clock says.
POLL_SECONDS = 0.5


class Kept(Protocol):
    """What a keeper needs of any repository."""

    state: RepoState
    timeout: float
    clock: Callable[[], int]

    def now_ms(self) -> int: ...


class SyncKept(Kept, Protocol):
    def run(self, flow: Flow[Any], timeout: float | None = ..., cleanup: bool = ...) -> Any: ...


class AsyncKept(Kept, Protocol):
    @property
    def table_name(self) -> str: ...

    def run(
        self, flow: Flow[Any], timeout: float | None = ..., cleanup: bool = ...
    ) -> Awaitable[Any]: ...


def due_returns(repo: Kept, everything: bool = False) -> Flow[None] | None:
    """The flow that writes back what is due now (or everything); None: nothing to do."""
    book = repo.state.reserves
    if book is None:
        return None
    now = repo.now_ms()
    items = book.drain() if everything else book.due(now)
    return give_back_reserves(repo.state, items, now) if items else None


def _wait_seconds(repo: Kept) -> float | None:
    """How long to sleep before looking again; None when no reserve is held (the keeper
    then ends, and the next reserve starts it again)."""
    book = repo.state.reserves
    now = repo.now_ms()
    due = None if book is None else book.next_due_ms(now)
    if due is None:
        return None
    return min(POLL_SECONDS, max(0.0, (due - now) / 1000))


def _next_wait(ref: weakref.ref[Any]) -> float | None:
    """Seconds until the keeper looks again; None: stop (repository gone, nothing held).
    The keeper holds its repository weakly, so an unclosed one can still be collected."""
    repo = ref()
    return None if repo is None else _wait_seconds(repo)


class _AtExit:
    """Returns the reserves of a repository nobody closed, when the interpreter exits.

    It holds the client's state (its book), not the repository: a repository dropped
    without `close()` is gone by then, but what it held must still go back.
    """

    def __init__(
        self, state: RepoState, clock: Callable[[], int], run: Callable[[Flow[None]], None]
    ) -> None:
        self._state = state
        self._clock = clock
        self._run = run
        atexit.register(self)

    def __call__(self) -> None:
        book = self._state.reserves
        items = [] if book is None else book.drain()
        if not items:
            return
        # One reserve per flow: a single call needs no thread pool, and an exiting
        # interpreter cannot start new threads.
        for item in items:
            try:
                self._run(give_back_reserves(self._state, [item], self._clock()))
            except Exception as error:  # exiting: say so, never raise
                log.warning("token reserves could not be returned at exit: %s", error)

    def cancel(self) -> None:
        atexit.unregister(self)


# unasync: source
class _AsyncTending:
    """The keeper's round, once: sleep, return what is due, until stopped or idle."""

    _repo: weakref.ref[Any]
    _at_exit: _AtExit
    _stop: bool
    #: Whether a round is running (set by `poke`, cleared when the round ends): read
    #: without a call by `tend_reserves`, so an acquire pokes only a keeper that is not.
    watching: bool = False

    async def _sleep(self, seconds: float) -> None:
        raise NotImplementedError

    async def _loop(self) -> None:
        try:
            await self._rounds()
        finally:
            self.watching = False  # the next acquire that holds a reserve pokes again

    async def _rounds(self) -> None:
        while not self._stop:
            wait = _next_wait(self._repo)
            if wait is None:
                return
            await self._sleep(wait)
            repo = self._repo()
            if self._stop or repo is None:
                return
            try:
                flow = due_returns(repo)
                if flow is not None:
                    await repo.run(flow, repo.timeout, cleanup=True)
            except Exception as error:  # background work: log, keep going
                log.warning("returning token reserves failed: %s", error)
            del repo

    async def _return_everything(self) -> None:
        """Closing, after the round stopped: no exit hook, every reserve back now."""
        self._at_exit.cancel()
        repo = self._repo()
        flow = None if repo is None else due_returns(repo, everything=True)
        if repo is not None and flow is not None:
            await repo.run(flow, repo.timeout, cleanup=True)


# unasync: generated from the source above by tools/unasync.py; do not edit
class _SyncTending:
    """The keeper's round, once: sleep, return what is due, until stopped or idle."""

    _repo: weakref.ref[Any]
    _at_exit: _AtExit
    _stop: bool
    #: Whether a round is running (set by `poke`, cleared when the round ends): read
    #: without a call by `tend_reserves`, so an acquire pokes only a keeper that is not.
    watching: bool = False

    def _sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        try:
            self._rounds()
        finally:
            self.watching = False  # the next acquire that holds a reserve pokes again

    def _rounds(self) -> None:
        while not self._stop:
            wait = _next_wait(self._repo)
            if wait is None:
                return
            self._sleep(wait)
            repo = self._repo()
            if self._stop or repo is None:
                return
            try:
                flow = due_returns(repo)
                if flow is not None:
                    repo.run(flow, repo.timeout, cleanup=True)
            except Exception as error:  # background work: log, keep going
                log.warning("returning token reserves failed: %s", error)
            del repo

    def _return_everything(self) -> None:
        """Closing, after the round stopped: no exit hook, every reserve back now."""
        self._at_exit.cancel()
        repo = self._repo()
        flow = None if repo is None else due_returns(repo, everything=True)
        if repo is not None and flow is not None:
            repo.run(flow, repo.timeout, cleanup=True)


# unasync: end


class SyncKeeper(_SyncTending):
    """A daemon thread per sync repository that holds reserves."""

    def __init__(self, repo: SyncKept, at_exit: Callable[[Flow[None]], None]) -> None:
        """`at_exit` runs a flow without the repository (which may be gone by then)."""
        self._repo = weakref.ref(repo)
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._at_exit = _AtExit(repo.state, repo.clock, at_exit)

    def poke(self) -> None:
        """A reserve may be held now: make sure the thread watches the book."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            if self._stop:
                return
            self.watching = True
            self._thread = threading.Thread(target=self._loop, name="zae-reserves", daemon=True)
            self._thread.start()

    def _sleep(self, seconds: float) -> None:
        self._wake.wait(seconds)  # close() wakes it early
        self._wake.clear()

    def close(self) -> None:
        """Stop the thread and return every reserve."""
        self._stop = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._return_everything()


class AsyncKeeper(_AsyncTending):
    """A task on the repository's event loop, while it holds reserves."""

    def __init__(self, repo: AsyncKept, client_kwargs: dict[str, Any]) -> None:
        self._repo = weakref.ref(repo)
        self._task: asyncio.Task[None] | None = None
        self._stop = False
        table = repo.table_name

        def on_boto3(flow: Flow[None]) -> None:
            import boto3

            from zae_limiter.capacity import CapacityMeter
            from zae_limiter.drivers import SyncRunner

            client = boto3.session.Session().client("dynamodb", **client_kwargs)
            SyncRunner(client, CapacityMeter(), table).run(flow, cleanup=True)

        self._at_exit = _AtExit(repo.state, repo.clock, on_boto3)

    def poke(self) -> None:
        if self._stop or (self._task is not None and not self._task.done()):
            return
        self.watching = True
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def close(self) -> None:
        """Stop the task and return every reserve."""
        self._stop = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._return_everything()
