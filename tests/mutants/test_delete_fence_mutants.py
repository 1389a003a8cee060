"""Mutants of the deletion fence (flows/records/entities.py `delete_buckets`,
flows/scaling/split.py): each breaks one half of it and shows the fence's test
(tests/integration/test_delete_fence.py, on moto) fails on it. With both reverted the
simulator's seed 5427 of quota worlds over-admitted until the split's quota fractions
moved that schedule (tests/sim/sim_mutants.py lists the seeds searched since).

- a shard k >= 1 made without checking shard 0 (a client that read shard 0 before the
  deletion makes its shard after it);
- the deletion deleting only the shards its query listed, without fencing shard 0;
- a deletion that stopped after its mark (its process died) that `entity delete` cannot
  finish, its record being gone: no shard of the entity can be made again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from tests.cli import test_entity as cli_tests
from tests.cli.conftest import cli_table, zae
from tests.conftest import Clock
from tests.integration import test_delete_fence as fence
from tests.mutants import must_fail, mutant, mutant_wrapping
from zae_limiter import SyncRateLimiter, keys
from zae_limiter.cli import entity as cli_entity
from zae_limiter.flows.records import entities

#: The fence's tests run on their module's moto-backed limiter; the CLI's on its table.
limiter = fence.limiter
__all__ = ["cli_table", "limiter", "zae"]


def _no_shard0_check(original: Callable[..., Any]) -> Callable[..., Any]:
    def broken(table: str, item: Any, shard0: Any, count: int) -> Any:
        made = original(table, item, shard0, count)
        return {"TransactItems": made["TransactItems"][:1]}

    return broken


def _delete_as_found(state: Any, entity_id: str, found: list[Any]) -> Any:
    yield from entities.batch_delete(state, found)


def creation_unfenced() -> AbstractContextManager[Any]:
    return mutant_wrapping(keys, "create_split_bucket", _no_shard0_check)


def deletion_as_found() -> AbstractContextManager[Any]:
    return mutant(entities, "delete_buckets", _delete_as_found)


@contextmanager
def fence_reverted() -> Iterator[None]:
    """Both halves reverted: the deletion as it was before seeds 3746 and 5427."""
    with creation_unfenced(), deletion_as_found():
        yield


def test_fence_test_catches_a_shard_made_without_checking_shard_0(
    limiter: SyncRateLimiter, table_name: str, clock: Clock
) -> None:
    with creation_unfenced():
        must_fail(fence.test_no_shard_is_made_once_the_deletion_fenced_shard_0,
                  limiter, table_name, clock)  # fmt: skip


def test_fence_test_catches_a_deletion_of_what_its_query_found_only(
    limiter: SyncRateLimiter, clock: Clock
) -> None:
    with deletion_as_found():
        must_fail(fence.test_a_shard_the_deletion_query_did_not_list_is_deleted, limiter, clock)


def test_the_stopped_deletion_test_catches_a_delete_that_needs_the_record(zae: Any) -> None:
    """`entity delete` refusing an entity whose record a stopped deletion already removed."""
    with mutant(cli_entity, "_stopped_deletion", lambda *_args: False):
        must_fail(cli_tests.test_delete_finishes_a_deletion_that_stopped_after_its_mark, zae)
