"""Mutants for the guarantees of docs/guarantees.md that the `ci` work proves: each check
breaks one product function on purpose and shows that the guarantee's own test fails.

The bound on an acquire, against real stalls (tests/integration/stall_cases.py):
- sync: the SDK's socket timeouts are what cut a stalled call; a client whose timeouts
  are not derived from the repository's `timeout` (botocore's 60 s) must be caught;
- async: the driver cuts a call in flight at the deadline; with the socket timeouts gone
  too, a deadline that is not enforced must be caught.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from tests.integration import stall_cases
from tests.mutants import must_fail, mutant, mutant_wrapping
from zae_limiter import drivers, repository


def _untimed(timeout: float | None) -> dict[str, Any]:
    # botocore's own defaults: the repository's timeout reaches no socket.
    return {"connect_timeout": 60, "read_timeout": 60, "retries": {"total_max_attempts": 1}}


@contextmanager
def calls_not_bounded_by_the_timeout() -> Iterator[None]:
    with mutant(repository, "_timeouts", _untimed):
        yield


@contextmanager
def deadline_not_enforced() -> Iterator[None]:
    """Neither the per-acquire deadline nor the async per-call bound binds any call."""

    def unbound_runner(original: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            self.call_timeout = None

        return init

    with ExitStack() as stack:
        stack.enter_context(calls_not_bounded_by_the_timeout())
        stack.enter_context(mutant(drivers._Deadline, "remaining", lambda self: None))
        stack.enter_context(mutant_wrapping(drivers._Runner, "__init__", unbound_runner))
        yield


def test_sync_stall_test_catches_calls_without_socket_timeouts(
    moto_http: str, table_name: str
) -> None:
    with calls_not_bounded_by_the_timeout():
        failure = must_fail(stall_cases.take_stalls_after_warm_up, "sync", moto_http, table_name)
    assert "still running" in str(failure)


def test_async_stall_test_catches_a_deadline_not_enforced(
    moto_http: str, table_name: str
) -> None:
    with deadline_not_enforced():
        failure = must_fail(stall_cases.take_stalls_after_warm_up, "async", moto_http, table_name)
    assert "still running" in str(failure)


def test_async_is_cut_by_the_deadline_alone(moto_http: str, table_name: str) -> None:
    # Without socket timeouts the async deadline still bounds the acquire: what the
    # mutant above removes is the deadline, not something the socket would have done.
    with calls_not_bounded_by_the_timeout():
        stall_cases.take_stalls_after_warm_up("async", moto_http, table_name)
