"""`deploy --plan --detailed-exitcode`: 0 up to date, 2 changes, 1 error (as CI reads them),
through `main()` as the console script runs it, against moto in process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from moto import mock_aws

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # moto: "no alarm support"


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws():
        yield


def code(*args: str) -> int:
    from zae_limiter.cli import main

    with CliRunner().isolation(env={"COLUMNS": "200"}):
        try:
            main(list(args))
        except SystemExit as done:
            return int(done.code or 0)
    return 0


PLAN = ("deploy", "-n", "demo", "--no-aggregator", "--plan", "--detailed-exitcode")


def test_stack_plan_exit_codes(moto: None) -> None:
    assert code(*PLAN) == 2  # no stack yet: a creation is planned
    assert code("deploy", "-n", "demo", "--no-aggregator", "--yes") == 0
    assert code(*PLAN) == 0  # up to date
    assert code(*PLAN, "-o", "json") == 0
    assert code(*PLAN, "--namespace-policies", "t1") == 2  # the policies would be added
    assert code("deploy", "-n", "demo", "--no-aggregator", "--plan") == 0  # without the flag


def test_table_only_plan_exit_codes(moto: None) -> None:
    table_plan = ("deploy", "-n", "plain", "--table-only", "--plan", "--detailed-exitcode")
    assert code(*table_plan) == 2
    assert code("deploy", "-n", "plain", "--table-only") == 0
    assert code(*table_plan) == 0


def test_errors_exit_1_not_2(moto: None) -> None:
    # A usage error is 2 normally; under --detailed-exitcode 2 means "changes", so it is 1.
    assert code("deploy", "-n", "demo", "--detailed-exitcode") == 1  # needs --plan
    assert code("deploy", "-n", "demo", "--no-aggregator", "--pitr-recovery-days", "0") == 2
    assert code(*PLAN, "--pitr-recovery-days", "0") == 1
