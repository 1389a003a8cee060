"""Mutants for cascade (docs/guarantees.md). When the parent refuses, the
child gets back what it gave (tests/integration/test_hot_path.py). The mutant drops the
compensation of an acquire that failed at some level, so the child keeps the token it
gave to an acquire that was refused. Cascade per resource
(tests/integration/test_cascade_per_resource.py): the mutant lets the entity-wide flag
decide for every resource."""

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


def _entity_wide(self: Any, resource: str) -> bool:
    return self.parent_id is not None and bool(self.cascade)


def test_cascade_per_resource_test_catches_a_choice_that_is_not_honoured(api: Api) -> None:
    """Mutant: a client that knows the entity ignores its per-resource choices (the
    entity-wide flag decides for every resource)."""
    from tests.integration import test_cascade_per_resource as per_resource_tests
    from zae_limiter.flows.context import EntityFacts

    with mutant(EntityFacts, "cascades", _entity_wide):
        must_fail(per_resource_tests.test_a_resource_can_be_left_out_of_a_cascading_entity, api)
