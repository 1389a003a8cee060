"""A split snapshot left in the numbers it was taken under (seed 4330's fix reverted): a
rebase moves shard 0 to a changed limit's numbers and leaves its `sf` as it was, and a
client that reads the item under other numbers than it stores splits shard 0's own
full-at time off instead of the snapshot. Either way a shard made later copies tokens
its share never held. The directed test on moto catches it
(tests/integration/test_split_rebase.py); so does the simulator
(tests/sim/sim_mutants.py, "split-snapshot-not-rebased")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from tests.conftest import Clock
from tests.integration import test_split_rebase as directed
from tests.mutants import must_fail, mutant
from zae_limiter import SyncRateLimiter
from zae_limiter.flows.scaling import split as split_module
from zae_limiter.flows.write import charge as charge_module
from zae_limiter.flows.write import plan as plan_module
from zae_limiter.flows.write import shares as shares_module
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

limiter = directed.limiter


def _split_as_before(bucket: BucketState, limit: Limit, now_ms: int) -> int | None:
    """The snapshot as stored, or shard 0's current full-at time under other numbers."""
    state, _, rebase = shares_module.current(bucket, limit, now_ms)
    snapshot = bucket.split_full_at.get(limit.name)
    return state.full_at if snapshot is None or rebase else snapshot


def _write_as_before(write: Any, *_args: Any) -> Any:
    return write


@contextmanager
def snapshot_not_rebased() -> Iterator[None]:
    with ExitStack() as stack:
        for owner in (shares_module, split_module):
            stack.enter_context(mutant(owner, "split_full_at", _split_as_before))
        for owner in (plan_module, charge_module):
            stack.enter_context(mutant(owner, "with_split", _write_as_before))
        yield


@contextmanager
def rebase_leaves_the_snapshot() -> Iterator[None]:
    """Only the write half reverted: readers convert, the REBASE leaves `sf` as it was."""
    with ExitStack() as stack:
        for owner in (plan_module, charge_module):
            stack.enter_context(mutant(owner, "with_split", _write_as_before))
        yield


def test_the_directed_test_catches_a_snapshot_left_unrebased(
    limiter: SyncRateLimiter, clock: Clock
) -> None:
    with snapshot_not_rebased():
        must_fail(directed.rebase_then_split, limiter, clock)


def test_the_directed_test_catches_a_rebase_that_leaves_the_snapshot(
    limiter: SyncRateLimiter, clock: Clock
) -> None:
    with rebase_leaves_the_snapshot():
        must_fail(directed.rebase_then_split, limiter, clock)
