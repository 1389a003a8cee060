"""Schema versions and the steps between them.

One module per step (`v0002_pre_shard_buckets`, ...), registered in `STEPS` in order.
`migrate(...)` is the flow the CLI runs: it finds where the table stands, runs the steps
up (or, when every one is reversible, down) to the target, and bumps the version record
after each. Every step is idempotent and resumable, so a rerun after a failure or an
interruption continues where it stopped, and a run with nothing to do changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from zae_limiter import keys
from zae_limiter.errors import SchemaVersionError
from zae_limiter.flows import Flow
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.audit import Auditor, write_transaction
from zae_limiter.flows.records.version import VersionRecord, read_version, write_version
from zae_limiter.migrations import v0002_pre_shard_buckets as _v0002
from zae_limiter.migrations import v0003_full_at_buckets as _v0003
from zae_limiter.migrations import v0004_quotas as _v0004
from zae_limiter.migrations import v0005_schedules_and_expiry as _v0005
from zae_limiter.migrations import v0006_global_limits as _v0006
from zae_limiter.migrations._base import (
    BASE_MIN_CLIENT_VERSION,
    BASE_VERSION,
    Migration,
    StepOutcome,
    StepPlan,
)

__all__ = [
    "BASE_MIN_CLIENT_VERSION",
    "BASE_VERSION",
    "LATEST",
    "STEPS",
    "Migration",
    "MigrationPlan",
    "StepOutcome",
    "StepPlan",
    "current_version",
    "migrate",
    "plan_migration",
    "select_steps",
    "status",
]


STEPS: tuple[Migration, ...] = (
    Migration(
        version=_v0002.version,
        description=_v0002.description,
        reversible=_v0002.reversible,
        min_client_version=_v0002.min_client_version,
        up=_v0002.up,
        plan=_v0002.plan,
        down=_v0002.down,
    ),
    Migration(
        version=_v0003.version,
        description=_v0003.description,
        reversible=_v0003.reversible,
        min_client_version=_v0003.min_client_version,
        up=_v0003.up,
        plan=_v0003.plan,
        down=_v0003.down,
    ),
    Migration(
        version=_v0004.version,
        description=_v0004.description,
        reversible=_v0004.reversible,
        min_client_version=_v0004.min_client_version,
        up=_v0004.up,
        plan=_v0004.plan,
        down=_v0004.down,
    ),
    Migration(
        version=_v0005.version,
        description=_v0005.description,
        reversible=_v0005.reversible,
        min_client_version=_v0005.min_client_version,
        up=_v0005.up,
        plan=_v0005.plan,
        down=_v0005.down,
    ),
    Migration(
        version=_v0006.version,
        description=_v0006.description,
        reversible=_v0006.reversible,
        min_client_version=_v0006.min_client_version,
        up=_v0006.up,
        plan=_v0006.plan,
        down=_v0006.down,
    ),
)
LATEST = STEPS[-1].version if STEPS else BASE_VERSION


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """Where the table stands, where it is going, and the steps in between."""

    table: str
    record: VersionRecord | None
    current: int
    target: int
    direction: str
    steps: tuple[Migration, ...]

    @property
    def pending(self) -> bool:
        """True when `migrate` has steps to run (a table without a record runs them all)."""
        return bool(self.steps)


def current_version(record: VersionRecord | None) -> int:
    """A table without a record is taken at BASE_VERSION: the steps find nothing to do."""
    return BASE_VERSION if record is None else record.schema_version


def select_steps(
    current: int,
    target: int,
    steps: tuple[Migration, ...] = STEPS,
    table: str = "the table",
) -> tuple[str, tuple[Migration, ...]]:
    """('up'|'down'|'none', the steps to run in order). Refuses what cannot be done."""
    latest = steps[-1].version if steps else BASE_VERSION
    if current > latest:
        raise SchemaVersionError(
            f"{table} has schema version {current}, newer than {latest}, the newest this "
            "zae-limiter release knows: upgrade zae-limiter"
        )
    if not BASE_VERSION <= target <= latest:
        raise SchemaVersionError(
            f"schema version {target} is unknown to this release "
            f"(it knows {BASE_VERSION} to {latest})"
        )
    if target > current:
        return "up", tuple(s for s in steps if current < s.version <= target)
    if target < current:
        down = tuple(reversed([s for s in steps if target < s.version <= current]))
        stuck = [s for s in down if not s.reversible or s.down is None]
        if stuck:
            raise SchemaVersionError(
                f"cannot go down from schema version {current} to {target}: step "
                f"{stuck[0].version} ({stuck[0].description}) cannot be undone"
            )
        return "down", down
    return "none", ()


def status(state: RepoState, target: int | None = None) -> Flow[MigrationPlan]:
    """Read the record and work out the steps to `target` (default: the latest)."""
    record = yield from read_version(state)
    current = current_version(record)
    wanted = LATEST if target is None else target
    direction, steps = select_steps(current, wanted, STEPS, f"table {state.table!r}")
    return MigrationPlan(state.table, record, current, wanted, direction, steps)


def plan_migration(state: RepoState, plan: MigrationPlan, now_ms: int) -> Flow[list[StepPlan]]:
    """What each step of the plan would touch (for --dry-run); changes nothing."""
    counted: list[StepPlan] = []
    for step in plan.steps:
        if plan.direction == "up":
            counted.append((yield from step.plan(state, now_ms)))
        else:
            counted.append(StepPlan(step.version, f"undo: {step.description}", 0))
    return counted


def migrate(
    state: RepoState,
    plan: MigrationPlan,
    now_ms: int,
    updated_by: str,
    steps: tuple[Migration, ...] = STEPS,
    auditor: Auditor | None = None,
) -> Flow[list[StepOutcome]]:
    """Run the plan's steps; the version record is bumped after each one.

    With an `auditor`, each step leaves a table-level audit event, written just after the
    version record (a step changes items throughout the table, in many writes: it cannot
    share one transaction with its event).
    """
    outcomes: list[StepOutcome] = []
    by_version = {s.version: s for s in steps}
    for step in plan.steps:
        before = step.version - 1 if plan.direction == "up" else step.version
        if plan.direction == "up":
            outcome = yield from step.up(state, now_ms)
            # Conditioned on the version the step started from: a write of this run that
            # lands after a later run finished never puts the version back.
            yield from write_version(
                state, step.version, step.min_client_version, now_ms, updated_by, before
            )
        else:
            assert step.down is not None  # select_steps refused irreversible steps
            outcome = yield from step.down(state, now_ms)
            below = by_version.get(step.version - 1)
            yield from write_version(
                state,
                step.version - 1,
                below.min_client_version if below else BASE_MIN_CLIENT_VERSION,
                now_ms,
                updated_by,
                before,
            )
        outcomes.append(outcome)
        if auditor is not None:
            yield from _record(state, auditor, before, outcome)
    return outcomes


def _record(state: RepoState, auditor: Auditor, before: int, outcome: StepOutcome) -> Flow[None]:
    after = before + 1 if outcome.direction == "up" else before - 1
    event = auditor.put(
        state,
        "migrate",
        namespace=keys.TABLE_NAMESPACE,
        before={"schema_version": before},
        after={"schema_version": after, "items": outcome.items, "skipped": outcome.skipped},
    )
    yield from write_transaction(state, [event])
