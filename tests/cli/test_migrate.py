"""`zae-limiter migrate` against moto in-process, and docs/migrate.md run as written."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner
from moto import mock_aws

from tests.old_layout import OldTable, build_old_table, create_table, old_version_item, scan_all
from zae_limiter import keys
from zae_limiter.cli import _errors, cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "migrate.md"


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def old(ddb: Any, table_name: str) -> OldTable:
    return build_old_table(ddb, table_name)


@dataclass
class Ran:
    code: int
    out: str
    err: str


def run(*args: str, input: str | None = None) -> Ran:
    """The CLI as the console script runs it (errors -> one line, exit code)."""
    with CliRunner().isolation(input=input) as (out, err, _):
        code = _errors.run(cli, list(args))
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def migrate(name: str, *args: str, input: str | None = None) -> Ran:
    return run("migrate", "--name", name, *args, input=input)


def test_check_dry_run_yes_check(ddb: Any, old: OldTable) -> None:
    before = scan_all(ddb, old.name)
    pending = migrate(old.name, "--check")
    assert pending.code == 2 and "schema version 1, target 6" in pending.out
    dry = migrate(old.name, "--dry-run")
    assert dry.code == 0, dry.err
    assert "5 (default: 4, tenant-b: 1)" in dry.out and "nothing was changed" in dry.out
    assert scan_all(ddb, old.name) == before

    done = migrate(old.name, "--yes")
    assert done.code == 0, done.err
    assert "step 2 done (up): 5 items changed" in done.out
    assert migrate(old.name, "--check").code == 0
    after = scan_all(ddb, old.name)
    assert all(keys.TTL in after[k] for k in old.old_buckets)
    assert after[("_/SYSTEM#", "#VERSION")][keys.A_SCHEMA_VERSION] == {"N": "6"}

    again = migrate(old.name, "--yes")
    assert again.code == 0 and "up to date" in again.out
    assert scan_all(ddb, old.name) == after


def test_declining_the_prompt_changes_nothing(ddb: Any, old: OldTable) -> None:
    before = scan_all(ddb, old.name)
    declined = migrate(old.name, input="n\n")
    assert declined.code == 1
    assert "Migrate table" in declined.err and "aborted" in declined.err
    no_answer = migrate(old.name, input="")  # CI without --yes: stdin closed
    assert no_answer.code == 1
    assert scan_all(ddb, old.name) == before
    accepted = migrate(old.name, input="y\n")
    assert accepted.code == 0 and "schema version 6" in accepted.out


def test_json_output(ddb: Any, old: OldTable) -> None:
    check = migrate(old.name, "--check", "--output", "json")
    assert check.code == 2
    body = json.loads(check.out)
    assert body["pending"] and body["schema_version"] == 1 and body["target"] == 6
    steps = [(s["version"], s["reversible"]) for s in body["steps"]]
    assert steps == [(2, False), (3, False), (4, False), (5, False), (6, False)]
    dry = json.loads(migrate(old.name, "--dry-run", "-o", "json").out)
    assert dry["dry_run"][0]["items"] == 5
    assert dry["dry_run"][0]["by_namespace"] == {"default": 4, "tenant-b": 1}
    done = migrate(old.name, "--yes", "-o", "json")
    assert done.code == 0
    applied = json.loads(done.out)
    assert applied["applied"] == [
        {"version": 2, "direction": "up", "items": 5, "skipped": False},
        {"version": 3, "direction": "up", "items": 0, "skipped": False},
        {"version": 4, "direction": "up", "items": 0, "skipped": False},
        {"version": 5, "direction": "up", "items": 0, "skipped": False},
        {"version": 6, "direction": "up", "items": 0, "skipped": False},
    ]
    assert not applied["pending"]


def test_fresh_table_is_stamped(ddb: Any, table_name: str) -> None:
    create_table(ddb, table_name)
    check = migrate(table_name, "--check")
    assert check.code == 2 and "no version record" in check.out
    assert migrate(table_name, "--yes").code == 0
    assert migrate(table_name, "--check").code == 0
    stored = scan_all(ddb, table_name)
    audit_pk = keys.audit_pk(keys.TABLE_NAMESPACE, None)
    assert sorted(pk for pk, _sk in stored) == [*[audit_pk] * 5, "_/SYSTEM#"]
    events = sorted(
        (keys.decode_audit(v) for (pk, _sk), v in stored.items() if pk == audit_pk),
        key=lambda e: e.before["schema_version"],
    )
    assert [(e.action, e.before, e.after) for e in events] == [
        ("migrate", {"schema_version": 1}, {"schema_version": 2, "items": 0, "skipped": False}),
        ("migrate", {"schema_version": 2}, {"schema_version": 3, "items": 0, "skipped": False}),
        ("migrate", {"schema_version": 3}, {"schema_version": 4, "items": 0, "skipped": False}),
        ("migrate", {"schema_version": 4}, {"schema_version": 5, "items": 0, "skipped": False}),
        ("migrate", {"schema_version": 5}, {"schema_version": 6, "items": 0, "skipped": False}),
    ]


def test_refusals_are_one_line_on_stderr(ddb: Any, old: OldTable) -> None:
    assert migrate(old.name, "--yes").code == 0
    down = migrate(old.name, "--to", "1", "--yes")
    assert down.code == 1 and down.out == ""
    assert down.err.startswith("error: cannot go down") and down.err.count("\n") == 1

    unknown = migrate(old.name, "--to", "9")
    assert unknown.code == 2 and "--to" in unknown.err

    ddb.put_item(TableName=old.name, Item=old_version_item(7))
    newer = migrate(old.name, "--check")
    assert newer.code == 1 and "newer than 6" in newer.err and "Traceback" not in newer.err

    missing = migrate("no-such-table", "--check")
    assert missing.code == 1 and "not found" in missing.err
    # Under --check, 2 means "pending": a usage error exits 1 instead.
    assert migrate(old.name, "--check", "--to", "9").code == 1


def test_blocked_dry_run_exits_non_zero(ddb: Any, table_name: str) -> None:
    build_old_table(ddb, table_name, indexes=("GSI1", "GSI2"))
    dry = migrate(table_name, "--dry-run")
    assert dry.code == 1 and "blocked:" in dry.out and "zae-limiter deploy" in dry.out
    run_ = migrate(table_name, "--yes")
    assert run_.code == 1 and "lacks index GSI3, GSI4" in run_.err


def test_help_lists_the_options() -> None:
    shown = run("migrate", "--help")
    assert shown.code == 0
    for option in ("--name", "--to", "--check", "--dry-run", "--yes", "--output"):
        assert option in shown.out


# ---------------------------------------------------------------- the documented sequence
def documented_commands() -> list[tuple[list[str], int, list[str]]]:
    """Each `$ zae-limiter ...` of the console blocks: args, exit code, expected stdout."""
    commands: list[tuple[list[str], int, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", DOC.read_text(), flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                command, _, comment = line[2:].partition("  # ")
                exit_code = int(comment.split()[1]) if comment.startswith("exit") else 0
                args = shlex.split(command)
                assert args[0] == "zae-limiter", line
                commands.append((args[1:], exit_code, []))
            elif line.strip():
                commands[-1][2].append(line)
    return commands


def test_docs_examples_run_as_written(ddb: Any) -> None:
    commands = documented_commands()
    assert [c[0][-1] for c in commands][:3] == ["--check", "--dry-run", "--yes"]
    build_old_table(ddb, "my-table")
    for args, exit_code, expected in commands:
        ran = run(*args)
        assert ran.code == exit_code, (args, ran)
        assert ran.out.splitlines() == expected, args
