"""Run the CLI exactly as a user does (`main()`: real exit codes, stdout and stderr apart)
against in-process moto: one table per test module, one fresh namespace per test."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from click.testing import CliRunner


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


class Zae:
    """`zae("entity", "list")` runs `zae-limiter entity list` on this test's namespace."""

    def __init__(self, table: str, namespace: str) -> None:
        self.table = table
        self.namespace = namespace

    def __call__(self, *args: str, input: str | None = None) -> Outcome:
        from zae_limiter.cli import main

        env = {"ZAEL_NAME": self.table, "ZAEL_NAMESPACE": self.namespace, "COLUMNS": "200"}
        with CliRunner().isolation(input=input, env=env) as (out, err, _mixed):
            try:
                main(list(args))
                code = 0
            except SystemExit as done:
                code = int(done.code or 0)
        return Outcome(code, out.getvalue().decode(), err.getvalue().decode())

    def limiter(self) -> Any:
        """A library client on the same table and namespace, to arrange or check state."""
        from zae_limiter import SyncRateLimiter, SyncRepository

        return SyncRateLimiter(SyncRepository.open(self.namespace, name=self.table))


@pytest.fixture(scope="module")
def cli_table() -> Iterator[str]:
    from moto import mock_aws

    from zae_limiter import SyncRepository

    name = f"cli-{uuid.uuid4().hex[:8]}"
    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        # Each command opens its own boto3 session, as a process would; loading the
        # service model again for every one would make these tests four times slower.
        shared = boto3.session.Session()
        patch.setattr(boto3.session, "Session", lambda *args, **kwargs: shared)
        SyncRepository.open(name=name, create_table=True).close()
        yield name


@pytest.fixture
def zae(cli_table: str) -> Zae:
    return Zae(cli_table, f"ns{uuid.uuid4().hex[:10]}")
