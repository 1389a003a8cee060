"""`zae-limiter limits apply` with scheduled limits, and `limits show` with the next
change of each: declared in the file, stored (and audited) like any limit change."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zae_limiter import Limit

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

FILE = """
resources:
  gpt-4:
    - tpm:100000/min
    - limit: rpm:100/min
      schedule:
        - {from: "0 22 * * *", to: "0 6 * * *", limit: "rpm:500/min", tz: Europe/Paris}
"""
NIGHT = Limit.per_minute("rpm", 100).during(
    "0 22 * * *", "0 6 * * *", Limit.per_minute("rpm", 500), tz="Europe/Paris"
)


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "limits.yaml"
    path.write_text(text)
    return str(path)


def test_a_schedule_is_applied_shown_with_its_next_change_and_then_unchanged(
    zae: Zae, tmp_path: Path
) -> None:
    path = _write(tmp_path, FILE)
    done = zae("limits", "apply", "-f", path, "--yes")
    assert done.code == 0, done.stderr
    assert "500/min from '0 22 * * *' to '0 6 * * *' Europe/Paris" in done.stdout
    assert set(zae.limiter().get_resource_defaults("gpt-4")) == {
        NIGHT,
        Limit.per_minute("tpm", 100000),
    }
    shown = zae("limits", "show", "--resource", "gpt-4", "-o", "json").json()
    (rpm,) = [x for x in shown["limits"] if x["name"] == "rpm"]
    assert rpm["schedule"] == [
        {"from": "0 22 * * *", "to": "0 6 * * *", "tz": "Europe/Paris", "limit": "rpm:500/min"}
    ]
    assert rpm["next_change"]["limit"] in ("rpm:500/min", "rpm:100/min")
    assert rpm["next_change"]["at"].endswith(":00 UTC")
    table = zae("limits", "show", "--resource", "gpt-4")
    assert "next change" in table.stdout
    again = zae("limits", "apply", "-f", path, "--yes")
    assert again.stdout.strip() == "no changes"
    # A schedule-only change is a change, and the plan says what it becomes.
    moved = FILE.replace('to: "0 6 * * *"', 'to: "0 7 * * *"')
    plan = zae("limits", "apply", "-f", _write(tmp_path, moved), "--dry-run")
    assert "to '0 7 * * *'" in plan.stdout, plan.stdout


def test_bad_schedules_are_refused_with_what_to_fix(zae: Zae, tmp_path: Path) -> None:
    cases = {
        'resources: {r: [{limit: "rpm:1/min", schedule: [{from: "x", to: "0 6 * * *", '
        'limit: "rpm:2/min"}]}]}': "invalid reset schedule 'x'",
        'resources: {r: [{limit: "rpm:1/min", schedule: [{from: "0 1 * * *", '
        'limit: "rpm:2/min"}]}]}': "'to' is missing",
        'resources: {r: [{limit: "rpm:1/min", schedule: [{from: "0 1 * * *", to: "0 2 * * *", '
        'limit: "tpm:2/min"}]}]}': "it must have the same name",
        'resources: {r: [{limit: "rpm:1/min", schedule: [{from: "0 1 * * *", to: "0 2 * * *", '
        'limit: "rpm:2/min", tz: "Mars/Olympus"}]}]}': "unknown time zone 'Mars/Olympus'",
        'resources: {r: [{limits: "rpm:1/min"}]}': "a scheduled limit is a mapping",
    }
    for text, message in cases.items():
        done = zae("limits", "apply", "-f", _write(tmp_path, text + "\n"), "--yes")
        assert done.code == 2, (text, done.stdout)
        assert message in done.stderr, (message, done.stderr)
        assert "Traceback" not in done.stderr


def test_bucket_ttl_per_level(zae: Zae) -> None:
    zae("entity", "create", "acme")
    done = zae("limits", "bucket-ttl", "--resource", "gpt-4", "3600")
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "bucket TTL at resource gpt-4 (resource default): 3600 s"
    shown = zae("limits", "bucket-ttl", "-e", "acme", "-o", "json").json()
    assert shown["bucket_ttl"] is None
    zae("limits", "bucket-ttl", "-e", "acme", "0")
    assert zae.limiter().get_bucket_ttl(entity_id="acme") == 0
    cleared = zae("limits", "bucket-ttl", "-e", "acme", "--clear", "-o", "json").json()
    assert cleared["bucket_ttl"] is None
    bad = zae("limits", "bucket-ttl", "--system", "--", "-7")
    assert bad.code == 2 and "bucket_ttl must be between 0" in bad.stderr
    assert "Traceback" not in bad.stderr
