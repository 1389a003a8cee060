"""A global limit from the CLI (docs/global.md, "Declaring a global limit"): `limits set`
and `limits apply` take the `:global=R1,R2,...` spec and store the regions with it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zae_limiter import Limit

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

SPEC = "rps:1000/sec:global=us-east-1,eu-west-1,ap-southeast-1"
REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-1"]


def test_limits_set_stores_a_global_limit(zae: Zae) -> None:
    zae("entity", "create", "acme")
    done = zae("limits", "set", "-e", "acme", "-r", "api", "-l", SPEC, "-o", "json")
    assert done.code == 0, done.stderr
    (shown,) = done.json()["limits"]
    assert (shown["spec"], shown["regions"]) == (SPEC, REGIONS)
    stored = zae.limiter().get_limits("acme", "api")
    assert stored == (Limit.per_second("rps", 1000).across(*REGIONS),)


def test_limits_apply_takes_the_global_spec(zae: Zae, tmp_path: Path) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text(f"resources:\n  api: ['{SPEC}', 'rpm:10/min']\n")
    done = zae("limits", "apply", "-f", str(path), "--yes")
    assert done.code == 0, done.stderr
    stored = {limit.name: limit for limit in zae.limiter().get_resource_defaults("api")}
    assert stored["rps"].regions == tuple(REGIONS) and not stored["rpm"].is_global


def test_a_bad_global_spec_says_what_is_wrong(zae: Zae) -> None:
    done = zae("limits", "set", "-r", "api", "-l", "rps:5/sec:global=us-east-1")
    assert done.code == 2
    assert "two or more distinct regions" in done.stderr
    assert "Traceback" not in done.stderr
