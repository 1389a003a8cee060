"""Soft limits from the CLI: `-l name:rate/unit:soft`, in `limits set` and in a
`limits apply` file, stored with the flag and shown as soft."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zae_limiter import Limit

if TYPE_CHECKING:
    from tests.cli.conftest import Zae


def test_set_stores_a_soft_limit_and_shows_it(zae: Zae) -> None:
    done = zae(
        "limits", "set", "-r", "gpt-4", "-l", "rpm:100/min:soft", "-l", "tpm:1000/min:2000:soft"
    )
    assert done.code == 0, done.stderr
    assert "100/min (soft)" in done.stdout
    assert set(zae.limiter().get_resource_defaults("gpt-4")) == {
        Limit.per_minute("rpm", 100, soft=True),
        Limit.per_minute("tpm", 1000, 2000, soft=True),
    }
    got = zae("limits", "get", "-r", "gpt-4", "-o", "json").json()["limits"]
    assert {(x["spec"], x.get("soft")) for x in got} == {
        ("rpm:100/min:soft", True), ("tpm:1000/min:2000:soft", True)
    }  # fmt: skip


def test_apply_makes_a_limit_soft_and_back(zae: Zae, tmp_path: Path) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text("resources:\n  gpt-4: ['rpm:100/min:soft', 'tpm:1000/min']\n")
    assert zae("limits", "apply", "-f", str(path), "--yes").code == 0
    assert Limit.per_minute("rpm", 100, soft=True) in zae.limiter().get_resource_defaults("gpt-4")
    path.write_text("resources:\n  gpt-4: ['rpm:100/min', 'tpm:1000/min']\n")
    dry = zae("limits", "apply", "-f", str(path), "--dry-run")
    assert "1 change(s)" in dry.stdout, dry.stdout
    assert zae("limits", "apply", "-f", str(path), "--yes").code == 0
    assert Limit.per_minute("rpm", 100) in zae.limiter().get_resource_defaults("gpt-4")


def test_a_bad_soft_spec_says_what_is_expected(zae: Zae) -> None:
    done = zae("limits", "set", "-r", "gpt-4", "-l", "rpm:soft")
    assert done.code == 2
    assert "[:soft]" in done.stderr and "Traceback" not in done.stderr
