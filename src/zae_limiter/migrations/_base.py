"""What a migration step is, and what it reports. No I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from zae_limiter.flows import Flow
from zae_limiter.flows.context import RepoState

#: The layout before any migration existed: schema-1 tables (pre-shard buckets).
BASE_VERSION = 1
#: The oldest client accepted by a table at BASE_VERSION: any.
BASE_MIN_CLIENT_VERSION = "0.0.0"


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What a step would do, counted on the table as it is now."""

    version: int
    action: str
    items: int
    by_namespace: dict[str, int] = field(default_factory=dict)
    blocked: str | None = None


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What a step did: `items` changed (0 on a second run), `skipped` if already applied."""

    version: int
    direction: str
    items: int
    skipped: bool = False


Up = Callable[[RepoState, int], Flow[StepOutcome]]
StepPlanner = Callable[[RepoState, int], Flow[StepPlan]]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version step, from `version - 1` to `version` (and back, if reversible).

    `up(state, now_ms)` is idempotent and resumable: it records its progress in the
    version record, and a second run changes nothing. It does not bump the version: the
    runner does that once `up` returns.
    """

    version: int
    description: str
    reversible: bool
    min_client_version: str
    up: Up
    plan: StepPlanner
    down: Up | None = None

    @property
    def name(self) -> str:
        return f"v{self.version:04d}"
