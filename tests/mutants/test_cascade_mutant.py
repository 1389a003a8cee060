"""Mutant for the cascade guarantee of docs/guarantees.md: when the parent refuses, the
child gets back what it gave (tests/integration/test_hot_path.py). The mutant drops the
compensation of an acquire that failed at some level, so the child keeps the token it
gave to an acquire that was refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.conftest import Api
from tests.integration import test_hot_path as hot_path_tests
from tests.mutants import must_fail, mutant
from zae_limiter.flows import Flow
from zae_limiter.flows import acquire as acquire_flow


def _keeps_everything(state: Any, taken: Sequence[Any], now_ms: int) -> Flow[None]:
    return None
    yield  # a flow that gives nothing back


def test_cascade_test_catches_a_child_that_is_not_given_back(api: Api) -> None:
    with mutant(acquire_flow, "compensate", _keeps_everything):
        must_fail(hot_path_tests.test_cascade_parent_rejection_gives_the_child_back, api)
