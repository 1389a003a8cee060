"""docs/operations.md stays true: its `top --once` and `audit list --archived
--archive-bucket` examples run on moto and exit 0; the picture it shows is there."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import boto3

from tests.cli.test_audit_archive import expire, run_batch

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
_BASH = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def runnable() -> list[list[str]]:
    """Example commands that end by themselves and need no deployed stack."""
    found = []
    for body in _BASH.findall(DOC.read_text()):
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["zae-limiter"] and ("--once" in words or "--archive-bucket" in words):
                found.append(words[1:])
    return found


def test_the_examples_run(zae: Zae) -> None:
    commands = runnable()
    assert {c[0] for c in commands} == {"top", "audit"}
    zae("entity", "create", "acme")
    boto3.client("s3").create_bucket(Bucket="my-bucket")
    assert run_batch(zae, [expire(zae, "acme", seq=1)], "my-bucket")["batchItemFailures"] == []
    for words in commands:
        done = zae(*words)
        assert done.code == 0, (words, done.stderr)
        if words[0] == "audit":
            assert [e["entity_id"] for e in done.json()["events"]] == ["acme"]


def test_the_picture_of_top_is_there() -> None:
    picture = DOC.parent / "top.svg"
    assert "](top.svg)" in DOC.read_text()
    assert picture.read_text().startswith("<svg") and "acme-prod" in picture.read_text()
