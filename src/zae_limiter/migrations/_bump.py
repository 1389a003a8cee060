"""A step that changes no item: the version bump alone (v0004, v0005, v0006). Its plan
converts nothing; its `up` only reports whether the table was already there."""

from __future__ import annotations

from zae_limiter.flows import Flow
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.version import read_version
from zae_limiter.migrations._base import StepOutcome, StepPlan, StepPlanner, Up


def bump_plan(version: int, action: str) -> StepPlanner:
    def plan(state: RepoState, now_ms: int) -> Flow[StepPlan]:
        """Nothing to convert: the step is the version bump alone."""
        yield from ()
        return StepPlan(version, action, 0)

    return plan


def bump_up(version: int) -> Up:
    def up(state: RepoState, now_ms: int) -> Flow[StepOutcome]:
        record = yield from read_version(state)
        if record is not None and record.schema_version >= version:
            return StepOutcome(version, "up", 0, skipped=True)
        return StepOutcome(version, "up", 0)

    return up
