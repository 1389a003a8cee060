"""`zae-limiter limits ...`: one level at a time, and `apply` from a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from zae_limiter import Limit

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

TPM = {
    "name": "tpm",
    "capacity": 150_000,
    "refill_amount": 100_000,
    "refill_period_seconds": 60,
    "spec": "tpm:100000/min:150000",
}


@pytest.mark.parametrize(
    ("level", "kind"),
    [
        (["--system"], {"kind": "system", "entity_id": None, "resource": None}),
        (["--resource", "gpt-4"], {"kind": "resource", "entity_id": None, "resource": "gpt-4"}),
        (["--entity", "acme"], {"kind": "entity_default", "entity_id": "acme", "resource": None}),
        (
            ["-e", "acme", "-r", "gpt-4"],
            {"kind": "entity", "entity_id": "acme", "resource": "gpt-4"},
        ),
    ],
)
def test_set_get_delete_each_level_json(zae: Zae, level: list[str], kind: dict[str, str]) -> None:
    zae("entity", "create", "acme")
    done = zae("limits", "set", *level, "-l", "tpm:100000/min:150000", "-o", "json")
    assert done.code == 0, done.stderr
    assert done.json() == {"level": kind, "limits": [TPM]}
    assert zae("limits", "get", *level, "-o", "json").json() == {"level": kind, "limits": [TPM]}
    done = zae("limits", "delete", *level, "--yes", "-o", "json")
    assert done.json() == {"level": kind, "deleted": True, "limits": [TPM]}
    assert zae("limits", "get", *level, "-o", "json").json() == {"level": kind, "limits": []}


def test_set_writes_what_the_library_reads(zae: Zae) -> None:
    zae("entity", "create", "acme")
    done = zae(
        "limits",
        "set",
        "--entity",
        "acme",
        "-r",
        "gpt-4",
        "-l",
        "rpm:100/min",
        "-l",
        "tpm:100000/min:150000",
        "-l",
        "rps:5",
    )
    assert done.code == 0, done.stderr
    assert "set 3 limit(s) at entity acme / resource gpt-4" in done.stdout
    assert "100000/min burst 150000" in done.stdout
    assert set(zae.limiter().get_limits("acme", "gpt-4")) == {
        Limit.per_minute("rpm", 100),
        Limit.per_minute("tpm", 100_000, 150_000),
        Limit.per_second("rps", 5),
    }


def test_set_replaces_the_whole_level(zae: Zae) -> None:
    zae("limits", "set", "--system", "-l", "rpm:1", "-l", "tpm:2")
    zae("limits", "set", "--system", "-l", "rpm:3")
    assert zae.limiter().get_system_defaults() == (Limit.per_second("rpm", 3),)


def test_get_table_and_empty_level(zae: Zae) -> None:
    zae("limits", "set", "--resource", "gpt-4", "-l", "rpm:500/min")
    done = zae("limits", "get", "--resource", "gpt-4")
    assert done.code == 0
    assert "resource gpt-4 (resource default)" in done.stdout
    assert "rpm:500/min" in done.stdout
    empty = zae("limits", "get", "--system")
    assert empty.code == 0
    assert empty.stdout.strip() == "no limits stored at system default"


def test_delete_asks_first(zae: Zae) -> None:
    zae("limits", "set", "--system", "-l", "rpm:1000/min")
    no = zae("limits", "delete", "--system", input="n\n")
    assert no.code == 1
    assert "Delete the limits at system default (rpm:1000/min)?" in no.stderr
    assert zae.limiter().get_system_defaults() != ()
    yes = zae("limits", "delete", "--system", input="y\n")
    assert yes.code == 0
    assert "deleted 1 limit(s) at system default" in yes.stdout
    assert zae.limiter().get_system_defaults() == ()
    again = zae("limits", "delete", "--system")
    assert again.code == 0
    assert "nothing deleted" in again.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["set", "-l", "rpm:1"], 2, "choose a level"),
        (["get"], 2, "choose a level"),
        (["set", "--system", "--resource", "r", "-l", "rpm:1"], 2, "--system cannot be combined"),
        (["set", "--system"], 2, "Missing option '--limit'"),
        (["set", "--system", "-l", "rpm"], 2, "invalid limit 'rpm'"),
        (["set", "--system", "-l", "rpm:1/week"], 2, "unknown unit 'week'"),
        (["set", "--system", "-l", "wcu:5"], 2, "'wcu' is reserved"),
        (["set", "--system", "-l", "rpm:1", "-l", "rpm:2"], 2, "'rpm' is given twice"),
        (["set", "-r", "_default_", "-l", "rpm:1"], 2, "'_default_' is reserved"),
        (["set", "-e", "ghost", "-l", "rpm:1"], 1, "entity 'ghost' does not exist"),
        (["get", "-e", "ghost"], 1, "entity 'ghost' does not exist"),
        (["delete", "-e", "ghost", "--yes"], 1, "entity 'ghost' does not exist"),
    ],
)
def test_errors(zae: Zae, args: list[str], code: int, message: str) -> None:
    done = zae("limits", *args, "-o", "json")
    assert done.code == code
    assert done.stdout == ""
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert sum(line.startswith(("Error", "error")) for line in done.stderr.splitlines()) == 1


FILE = """
system: [rpm:1000/min]
resources:
  gpt-4: [rpm:500/min, "tpm:100000/min:150000"]
entities:
  key-2:
    parent: acme
    cascade: true
    limits:
      gpt-4: [tpm:20000/min]
  acme:
    name: Acme Corp
    limits:
      "*": [rpm:200/min]
"""


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "limits.yaml"
    path.write_text(text)
    return str(path)


def test_apply_plans_applies_and_then_has_nothing_to_do(zae: Zae, tmp_path: Path) -> None:
    path = _write(tmp_path, FILE)
    dry = zae("limits", "apply", "-f", path, "--dry-run")
    assert dry.code == 0, dry.stderr
    assert "dry run: 6 change(s) not applied" in dry.stdout
    assert "entity acme (name 'Acme Corp')" in dry.stdout
    assert zae.limiter().get_system_defaults() == ()
    done = zae("limits", "apply", "-f", path, "--yes")
    assert done.code == 0, done.stderr
    assert "applied 6 change(s)" in done.stdout
    limiter = zae.limiter()
    assert limiter.get_entity("key-2").parent_id == "acme"
    assert limiter.get_entity("key-2").cascade is True
    assert limiter.get_limits("acme") == (Limit.per_minute("rpm", 200),)
    assert limiter.resolve_limits("key-2", "gpt-4").source == "entity"
    again = zae("limits", "apply", "-f", path, "--yes")
    assert again.code == 0
    assert again.stdout.strip() == "no changes"


def test_apply_json_changes_and_removals(zae: Zae, tmp_path: Path) -> None:
    zae("limits", "apply", "-f", _write(tmp_path, FILE), "--yes")
    changed = FILE.replace("rpm:1000/min", "rpm:2000/min").replace('"*": [rpm:200/min]', '"*": []')
    done = zae("limits", "apply", "-f", _write(tmp_path, changed), "--yes", "-o", "json")
    assert done.code == 0, done.stderr
    body = done.json()
    assert body["applied"] is True and body["dry_run"] is False
    assert body["create_entities"] == []
    assert [(c["action"], c["level"]["kind"]) for c in body["changes"]] == [
        ("change", "system"),
        ("remove", "entity_default"),
    ]
    system = body["changes"][0]
    assert [x["spec"] for x in system["before"]] == ["rpm:1000/min"]
    assert [x["spec"] for x in system["after"]] == ["rpm:2000/min"]
    assert zae.limiter().get_limits("acme") == ()


def test_apply_asks_and_no_writes_nothing(zae: Zae, tmp_path: Path) -> None:
    done = zae("limits", "apply", "-f", _write(tmp_path, FILE), input="n\n")
    assert done.code == 1
    assert "Apply 6 change(s)?" in done.stderr
    assert zae.limiter().list_entities() == []


def test_apply_from_stdin_dry_run_json(zae: Zae) -> None:
    done = zae(
        "limits", "apply", "-f", "-", "--dry-run", "-o", "json", input="resources: {r: [rpm:1]}\n"
    )
    assert done.code == 0, done.stderr
    body = done.json()
    assert body["applied"] is False and body["dry_run"] is True
    assert body["changes"][0]["action"] == "add"


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("system: [wcu:1]", 2, "system: limit name 'wcu' is reserved"),
        ("entities: {k: {parent: ghost}}", 1, "entity 'k': parent 'ghost' does not exist"),
        ("entities: {acme: {name: Other}}", 1, "name is 'Acme Corp' but the file says 'Other'"),
        (
            "entities: {x: {limits: {'_default_': [rpm:1]}}}",
            2,
            "entities.x.limits._default_: resource name '_default_' is reserved",
        ),
        ("entities: {'a#b': {}}", 2, "entities: entity_id 'a#b' contains '#'"),
    ],
)
def test_apply_errors_write_nothing(
    zae: Zae, tmp_path: Path, text: str, code: int, message: str
) -> None:
    zae("entity", "create", "acme", "--display-name", "Acme Corp")
    done = zae("limits", "apply", "-f", _write(tmp_path, text), "--yes")
    assert done.code == code
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert zae.limiter().list_entities() == ["acme"]


def test_apply_empty_and_missing_files(zae: Zae, tmp_path: Path) -> None:
    done = zae("limits", "apply", "-f", _write(tmp_path, "entities: {}\n"), "--yes")
    assert done.stdout.strip() == "no changes"
    missing = zae("limits", "apply", "-f", "no-such-file.yaml")
    assert missing.code == 2
    assert "No such file" in missing.stderr
