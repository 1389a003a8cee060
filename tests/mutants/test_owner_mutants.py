"""Mutants of the one-writer rule for a client's entity state (flows/context.py); each must
be caught by tests/unit/test_flows_context.py:

- a flow that writes the shard count itself instead of through ShardKnowledge (as the
  doubling, the split and the evidence read each did before the split);
- a flow that pops the throttle gate itself;
- a flow that replaces the facts outside flows/context.py;
- facts learned later that are not kept (the choices of a record or a move dropped).
"""

from __future__ import annotations

import pytest

from tests.mutants import must_fail, mutant
from tests.unit import test_flows_context as owners
from zae_limiter.flows import acquire as acquire_flow
from zae_limiter.flows.context import EntityFacts

STRANGERS = [
    'meta.shards.counts[level.resource] = 8\n',
    "meta.gate.closed.pop(level.resource, None)\n",
    "meta.facts = replace(meta.facts, parent_id=parent)\n",
]


@pytest.mark.parametrize("stranger", STRANGERS)
def test_the_owner_test_catches_a_second_writer(stranger: str) -> None:
    owners.test_each_piece_of_entity_state_has_one_writer()
    real = owners._sources()
    added = [*real, ("flows/scaling/split.py", stranger)]
    with mutant(owners, "_sources", lambda: added):
        must_fail(owners.test_each_piece_of_entity_state_has_one_writer)


def test_the_facts_test_catches_facts_that_change_in_place() -> None:
    owners.test_entity_facts_never_change_in_place()

    def in_place(self: EntityFacts, choices: object) -> EntityFacts:
        return self

    with mutant(EntityFacts, "choosing", in_place):
        must_fail(owners.test_what_is_learned_replaces_the_facts_whole)


def test_the_settled_test_catches_facts_settled_for_a_resource_no_bucket_said() -> None:
    """`flows.acquire.settled` that asks only whether the facts exist: an acquire of a
    resource whose bucket this client never wrote would skip the parent the record read
    to make that bucket names, and that parent's global limits."""
    with mutant(acquire_flow, "settled", lambda facts, resources: True):
        must_fail(owners.test_settled_facts_are_those_no_take_can_change)
