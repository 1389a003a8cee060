"""`zae-limiter render --policy ROLE`: the IAM policy of a role, as docs/deploy.md shows it.

What each role is granted is tested against the library's calls in
tests/integration/test_iam_policy.py; here, the command that prints it and the page.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from zae_limiter.cli import main
from zae_limiter.infra import policy

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
#: A ```bash block holding one `render --policy` command, then the ```json block it prints.
_EXAMPLE = re.compile(
    r"```bash\n(zae-limiter render --policy [^\n]*)\n```\s*```json\n(.*?)```", re.DOTALL
)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_the_docs_show_each_role_as_the_command_prints_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    examples = _EXAMPLE.findall(DOC.read_text())
    roles = [shlex.split(command)[3] for command, _ in examples]
    assert roles == list(policy.ROLES)
    for command, block in examples:
        code, out, err = run(shlex.split(command)[1:], capsys)
        assert code == 0, err
        assert json.loads(block) == json.loads(out), command
        assert block == out, command  # the same text, so the page can be pasted as is


def test_placeholders_the_table_and_the_indexes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["render", "--policy", "operator"], capsys)
    assert code == 0
    document = json.loads(out)
    resources = {r for s in document["Statement"] for r in s["Resource"]}
    table = "arn:aws:dynamodb:REGION:ACCOUNT:table/zae-limiter"
    assert table in resources
    assert f"{table}/index/GSI4" in resources
    assert f"{table}/stream/*" in resources
    for statement in document["Statement"]:
        assert "*" not in statement["Resource"]
        assert not any("*" in action for action in statement["Action"])


def test_the_client_may_not_write_audit_partitions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["render", "--policy", "client", "-n", "demo"], capsys)
    assert code == 0
    (deny,) = [s for s in json.loads(out)["Statement"] if s["Effect"] == "Deny"]
    assert deny["Action"] == ["dynamodb:PutItem", "dynamodb:UpdateItem"]
    assert deny["Condition"]["ForAnyValue:StringLike"]["dynamodb:LeadingKeys"] == ["*/AUDIT#*"]


def test_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "aggregator.json"
    code, out, _ = run(["render", "--policy", "aggregator", "-o", str(target)], capsys)
    assert (code, out) == (0, "")
    actions = {a for s in json.loads(target.read_text())["Statement"] for a in s["Action"]}
    assert {"s3:PutObject", "sqs:SendMessage", "dynamodb:GetRecords"} <= actions


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "client", "--account", "12"], "not a 12-digit account id"),
        (["--policy", "client", "--region", "Europe"], "not an AWS region"),
        (["--policy", "client", "-n", "bad_name"], "invalid name"),
        (["--policy", "nobody"], "'nobody' is not one of"),
        (["--region", "eu-west-1"], "go with --policy"),
        (["--policy", "client", "--lint"], "does not go with --policy"),
    ],
)
def test_bad_input_exits_2_with_one_message(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["render", *args], capsys)
    assert code == 2
    assert out == ""
    assert message in err and "Traceback" not in err
