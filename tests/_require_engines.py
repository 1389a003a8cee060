"""With ZAEL_REQUIRE_ENGINES=1 (set by .ci/run), a skipped test is an error.

Every skip in this suite means a component is missing (DynamoDB Local, Java, a moto
server, an optional package), and a CI run that quietly skipped the engine tier would be
green without having run the strongest tests. Locally, skips stay skips and `make test`
lists them (`-rs`). Loaded by tests/conftest.py; also usable as `-p tests._require_engines`.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

ENV = "ZAEL_REQUIRE_ENGINES"


def required() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0")


def _reason(longrepr: Any) -> str:
    # A skip's longrepr is (file, line, "Skipped: why"); keep the why.
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _as_error(report: Any) -> None:
    report.outcome = "failed"
    report.longrepr = (
        f"{ENV}=1: this run must not skip, but a required component is missing: "
        f"{_reason(report.longrepr)}"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
    None, pytest.TestReport, pytest.TestReport
]:
    report = yield
    # An expected failure reports as skipped too; it carries `wasxfail` and stays as is.
    if required() and report.skipped and not hasattr(report, "wasxfail"):
        _as_error(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[
    None, pytest.CollectReport, pytest.CollectReport
]:
    report = yield
    if required() and report.skipped:  # a module-level skip or importorskip
        _as_error(report)
    return report
