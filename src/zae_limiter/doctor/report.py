"""What `zae-limiter doctor` finds: one `Check` per thing looked at, and the report.

A check is `ok`, `warn` (works, but something should change), `fail` (something is
broken or will break) or `skip` (not checkable here, with the reason). The report's exit
code is what CI reads: 1 if any check failed, else 2 if any warned, else 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")

EXIT_HEALTHY = 0
EXIT_FAULTS = 1
EXIT_WARNINGS = 2


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: what was looked at, what was found, and how to fix it."""

    name: str
    status: Status
    summary: str
    fix: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "fix": self.fix,
            "details": dict(self.details),
        }


def ok(name: str, summary: str, **details: Any) -> Check:
    return Check(name, "ok", summary, None, details)


def warn(name: str, summary: str, fix: str, **details: Any) -> Check:
    return Check(name, "warn", summary, fix, details)


def fail(name: str, summary: str, fix: str, **details: Any) -> Check:
    return Check(name, "fail", summary, fix, details)


def skip(name: str, reason: str, **details: Any) -> Check:
    return Check(name, "skip", reason, None, details)


@dataclass(frozen=True, slots=True)
class DoctorReport:
    table: str
    namespace: str
    region: str | None
    endpoint_url: str | None
    local: bool
    checks: Sequence[Check]

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for c in self.checks if c.status == s) for s in STATUSES}

    @property
    def exit_code(self) -> int:
        statuses = {c.status for c in self.checks}
        if "fail" in statuses:
            return EXIT_FAULTS
        if "warn" in statuses:
            return EXIT_WARNINGS
        return EXIT_HEALTHY

    def check(self, name: str) -> Check:
        """The check of that name (KeyError if none ran)."""
        for found in self.checks:
            if found.name == name:
                return found
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "namespace": self.namespace,
            "region": self.region,
            "endpoint_url": self.endpoint_url,
            "local": self.local,
            "healthy": self.exit_code == EXIT_HEALTHY,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "checks": [c.as_dict() for c in self.checks],
        }
