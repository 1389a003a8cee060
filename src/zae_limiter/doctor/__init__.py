"""`zae-limiter doctor`: check a deployment and say what is wrong and how to fix it.

One module per subject: `access` (credentials, region), `table` (table, indexes, stream),
`schema_version`, `aggregator`, `monitoring` (alarms, dashboard), `permissions`, `clock`.
Each check returns a `Check`; where a check asks AWS, gathering and judging are apart so
the verdicts are tested without AWS. `run_doctor` runs them all (see docs/doctor.md).
"""

from __future__ import annotations

from zae_limiter.doctor.context import DoctorTarget
from zae_limiter.doctor.report import (
    EXIT_FAULTS,
    EXIT_HEALTHY,
    EXIT_WARNINGS,
    Check,
    DoctorReport,
    Status,
)
from zae_limiter.doctor.run import CHECKS, run_doctor

__all__ = [
    "CHECKS",
    "EXIT_FAULTS",
    "EXIT_HEALTHY",
    "EXIT_WARNINGS",
    "Check",
    "DoctorReport",
    "DoctorTarget",
    "Status",
    "run_doctor",
]
