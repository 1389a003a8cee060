"""`zae-limiter audit list`, `entity update` and `limits apply --prune`, run as a user does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zae_limiter import Limit

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

LIMITS_FILE = """
system:
  - rpm:1000/min
resources:
  gpt-4:
    - tpm:100000/min
entities:
  acme:
    limits:
      gpt-4:
        - rpm:100/min
"""


def events(zae: Zae, *args: str) -> list[dict[str, Any]]:
    done = zae("audit", "list", "-o", "json", *args)
    assert done.code == 0, done.stderr
    return list(done.json()["events"])


def test_every_cli_change_is_in_the_audit_trail_with_its_principal(zae: Zae) -> None:
    as_alice = ("--principal", "alice@example.com")
    assert zae("entity", "create", "org", *as_alice).code == 0
    assert zae("entity", "create", "acme", *as_alice).code == 0
    assert zae("limits", "set", "-e", "acme", "-l", "rpm:10/min", *as_alice).code == 0
    assert zae("entity", "update", "acme", "--parent", "org", "--cascade", *as_alice).code == 0
    assert zae("limits", "delete", "-e", "acme", "--yes", *as_alice).code == 0
    assert zae("entity", "delete", "acme", "--yes", *as_alice).code == 0
    found = events(zae)
    assert [(e["action"], e["entity_id"]) for e in found] == [
        ("create_entity", "org"),
        ("create_entity", "acme"),
        ("set_limits", "acme"),
        ("update_entity", "acme"),
        ("delete_limits", "acme"),
        ("delete_entity", "acme"),
    ]
    assert {e["principal"] for e in found} == {"alice@example.com"}
    update = found[3]
    assert update["before"] == {"name": None, "parent_id": None, "cascade": False}
    assert update["after"] == {"name": None, "parent_id": "org", "cascade": True}
    assert [e["action"] for e in events(zae, "--entity", "org")] == ["create_entity"]
    assert events(zae, "--since", "2999-01-01") == []
    assert len(events(zae, "--since", "1h")) == 6
    assert [e["action"] for e in events(zae, "--limit", "1")] == ["delete_entity"]
    human = zae("audit", "list")
    assert human.code == 0 and "update_entity" in human.stdout and "alice" in human.stdout


def test_principal_defaults_to_the_callers_identity(zae: Zae) -> None:
    assert zae("entity", "create", "acme").code == 0
    (event,) = events(zae)
    assert event["principal"].startswith("arn:aws:")  # moto's STS GetCallerIdentity


def test_acquires_write_no_audit_events(zae: Zae) -> None:
    zae("entity", "create", "acme")
    zae("limits", "set", "-e", "acme", "-l", "rpm:10/min")
    limiter = zae.limiter()
    for _ in range(3):
        with limiter.acquire("acme", "gpt-4", {"rpm": 1}):
            pass
    assert [e["action"] for e in events(zae)] == ["create_entity", "set_limits"]


def test_bad_since_is_a_clear_usage_error(zae: Zae) -> None:
    done = zae("audit", "list", "--since", "yesterday-ish")
    assert done.code == 2
    assert "--since" in done.stderr and "30m" in done.stderr and "Traceback" not in done.stderr


def test_entity_update(zae: Zae) -> None:
    zae("entity", "create", "org")
    zae("entity", "create", "acme", "--display-name", "Acme")
    done = zae("entity", "update", "acme", "--parent", "org", "--cascade", "-o", "json")
    assert done.code == 0, done.stderr
    assert (done.json()["parent_id"], done.json()["cascade"]) == ("org", True)
    assert done.json()["name"] == "Acme"  # not given: kept
    detached = zae("entity", "update", "acme", "--no-parent", "-o", "json").json()
    assert (detached["parent_id"], detached["cascade"]) == (None, False)
    assert zae("entity", "update", "acme").code == 2  # nothing to change
    missing = zae("entity", "update", "nobody", "--display-name", "x")
    assert missing.code == 1 and "entity create nobody" in missing.stderr
    assert zae("entity", "update", "acme", "--parent", "org").code == 0
    cycle = zae("entity", "update", "org", "--parent", "acme")
    assert cycle.code == 2 and "cycle" in cycle.stderr


def test_limits_apply_prune_removes_what_the_file_does_not_name(zae: Zae, tmp_path: Any) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text(LIMITS_FILE)
    limiter = zae.limiter()
    limiter.create_entity("acme")
    limiter.create_entity("old")
    limiter.set_limits("old", [Limit.per_minute("rpm", 5)])
    limiter.set_limits("acme", [Limit.per_minute("rpm", 5)], resource="claude")
    limiter.set_resource_defaults("claude", [Limit.per_minute("rpm", 5)])

    kept = zae("limits", "apply", "-f", str(path), "--yes", "-o", "json")
    assert kept.code == 0, kept.stderr
    assert limiter.get_limits("old") != ()  # without --prune, unnamed levels stay

    dry = zae("limits", "apply", "-f", str(path), "--prune", "--dry-run")
    assert dry.code == 0, dry.stderr
    assert "remove" in dry.stdout and "entity old" in dry.stdout
    assert "resource claude" in dry.stdout
    assert limiter.get_limits("old") != ()

    declined = zae("limits", "apply", "-f", str(path), "--prune", input="n\n")
    assert declined.code == 1 and limiter.get_limits("old") != ()

    pruned = zae("limits", "apply", "-f", str(path), "--prune", "--yes", "-o", "json")
    assert pruned.code == 0, pruned.stderr
    removed = {
        (c["level"]["entity_id"], c["level"]["resource"])
        for c in pruned.json()["changes"]
        if c["action"] == "remove"
    }
    assert removed == {("old", None), ("acme", "claude"), (None, "claude")}
    assert sorted(limiter.list_limit_levels(), key=str) == sorted(
        [(None, None), (None, "gpt-4"), ("acme", "gpt-4")], key=str
    )
    assert limiter.get_entity("old") is not None  # entities are kept
    again = zae("limits", "apply", "-f", str(path), "--prune", "--yes")
    assert again.code == 0 and "no changes" in again.stdout
    deletions = [e for e in events(zae) if e["action"] == "delete_limits"]
    assert len(deletions) == 3
