"""`LimitStatus`: one limit as a caller sees it. A leaf module, so that the error raised
on a rejection (`errors.RateLimitExceeded`) can carry it without importing the models."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LimitStatus:
    """The state of one limit as a caller sees it, in whole tokens."""

    entity_id: str
    resource: str
    limit_name: str
    capacity: int
    available: int
    requested: int
    retry_after_seconds: float
    #: "rate" for a limit that refills, "quota" for one that resets (docs/quotas.md).
    kind: str = "rate"
    #: A quota's next reset (ms since the epoch); None for a refilling limit, whose
    #: tokens come back continuously.
    resets_at_ms: int | None = None

    @property
    def exceeded(self) -> bool:
        return self.requested > self.available
