"""Mutants for the guarantees of docs/guarantees.md that the `ci` work proves: each check
breaks one product function on purpose and shows that the guarantee's own test fails.

The bound on an acquire, against real stalls (tests/integration/stall_cases.py):
- sync: the SDK's socket timeouts are what cut a stalled call; a client whose timeouts
  are not derived from the repository's `timeout` (botocore's 60 s) must be caught;
- async: the driver cuts a call in flight at the deadline; with the socket timeouts gone
  too, a deadline that is not enforced must be caught.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.conftest import Api
from tests.engine import test_wire_conformance as conformance
from tests.integration import stall_cases
from tests.integration import test_audit as audit_tests
from tests.integration import test_migrations as migrations_tests
from tests.integration import test_reserves as reserves_tests
from tests.mutants import must_fail, mutant, mutant_wrapping
from tests.unit import test_wire_transport as wire_transport_tests
from zae_limiter import client_options, drivers, errors, keys
from zae_limiter.flows import Call, one
from zae_limiter.flows.records import audit as audit_flows
from zae_limiter.flows.records import entities as entity_flows
from zae_limiter.migrations import v0002_pre_shard_buckets as v0002
from zae_limiter.wire import protocol
from zae_limiter.wire.client import Hooks, LeanBase


def _untimed(timeout: float | None) -> dict[str, Any]:
    # botocore's own defaults: the repository's timeout reaches no socket.
    return {"connect_timeout": 60, "read_timeout": 60, "retries": {"total_max_attempts": 1}}


@contextmanager
def calls_not_bounded_by_the_timeout() -> Iterator[None]:
    with mutant(client_options, "_timeouts", _untimed):
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


# A return of a token reserve whose outcome is unknown (tests/integration/test_reserves.py):
# treating every failure as a throttle (refused, so not applied) retries it.


def test_unknown_return_test_catches_a_retried_return(api: Api) -> None:
    always = property(lambda self: True)
    with mutant(errors.RateLimiterUnavailable, "throttled", always):
        must_fail(reserves_tests.unknown_outcome_return, api)


# The lean path's parser (tests/engine/test_wire_conformance.py): the same raw bytes read
# by botocore's parser and by ours.


def _without_message(original: Any) -> Any:
    def parse(*args: Any, **kwargs: Any) -> dict[str, Any]:
        parsed: dict[str, Any] = original(*args, **kwargs)
        if "Error" in parsed:
            parsed["Error"] = {k: v for k, v in parsed["Error"].items() if k != "Message"}
        return parsed

    return parse


@pytest.fixture(scope="module")
def raw_server() -> Iterator[Any]:
    server = conformance.RawServer()
    yield server
    server.close()


@pytest.mark.parametrize("answer", ["503-html", "400-typed-extra", "502-text"])
def test_error_body_test_catches_a_parser_that_drops_the_message(
    raw_server: Any, answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = conformance.test_error_bodies_read_as_botocores_own_parser_reads_them
    with mutant_wrapping(protocol, "parse", _without_message):
        must_fail(body, raw_server, answer, monkeypatch)


def test_error_body_test_catches_a_parser_that_drops_the_failed_conditions_item(
    raw_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = conformance.test_error_bodies_read_as_botocores_own_parser_reads_them
    with mutant(LeanBase, "members", lambda self, code: ()):
        must_fail(body, raw_server, "400-ccf-item", monkeypatch)


# Audit atomicity (tests/integration/test_audit.py): the change and its event go in one
# transaction. The mutant writes them one after the other, each in its own transaction.


def _split_commit(state: Any, items: Any) -> Any:
    for item in items:
        result = yield from one(Call("transact_write_items", keys.transact([item])))
        if not result.ok:
            return False
    return True


def test_audit_test_catches_a_change_written_apart_from_its_event(api: Api) -> None:
    # Every module that looks `commit` up: the audited change (limits, entity updates)
    # and the entity flows (create, delete).
    with mutant(audit_flows, "write_transaction", _split_commit), mutant(
        entity_flows, "write_transaction", _split_commit
    ):
        must_fail(audit_tests.failing_event_write_leaves_no_change, api)


# Migration resume (tests/integration/test_migrations.py): a run after a crash starts from
# the saved cursor. The mutant forgets the saved phase, so the step starts over.


def _forgetful(original: Any) -> Any:
    def begin(*args: Any, **kwargs: Any) -> Any:
        record = yield from original(*args, **kwargs)
        if record is None:
            return None
        return dataclasses.replace(record, migration_step=None, cursor=None, done=0)

    return begin


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def test_resume_test_catches_a_migration_that_starts_over(
    ddb: Any, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = migrations_tests.test_interrupted_migration_resumes_where_it_stopped
    with mutant_wrapping(v0002, "begin_migration", _forgetful):
        must_fail(body, ddb, table_name, monkeypatch)


# Hooks see the regular client's arguments (tests/unit/test_wire_transport.py): the mutant
# shows `before-call` handlers the endpoint without botocore's trailing "/".


def _bare_url(original: Any) -> Any:
    def build(self: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = original(self, operation, params)
        request["url"] = self.url
        return request

    return build


def test_hook_test_catches_a_before_call_url_unlike_botocores() -> None:
    server = wire_transport_tests.Server(wire_transport_tests.item)
    try:
        with mutant_wrapping(LeanBase, "build", _bare_url):
            body = wire_transport_tests.test_hooks_get_the_arguments_the_regular_client_passes
            must_fail(body, server)
    finally:
        server.sock.close()


# The retry quota comes back after a lean call (tests/unit/test_wire_transport.py): the
# mutant calls none of the `after-call` handlers the lean client calls directly.


def _after_call_skipped(original: Any) -> Any:
    def direct(self: Any, name: str) -> Any:
        return () if name.startswith("after-call.") else original(self, name)

    return direct


def test_retry_quota_test_catches_after_call_handlers_left_uncalled() -> None:
    server = wire_transport_tests.Server(wire_transport_tests.keep)
    try:
        with mutant_wrapping(Hooks, "direct", _after_call_skipped):
            body = (
                wire_transport_tests.test_the_retry_quota_comes_back_after_a_lean_call_as_after_a_regular_one
            )
            must_fail(body, server)
    finally:
        server.sock.close()
