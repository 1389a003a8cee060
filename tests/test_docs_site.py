"""The documentation site builds with --strict, and its API reference has the public API.

`make docs` runs the same build; here it goes to a temporary directory so the test leaves
no site/ behind. A second build, of a copy of docs/ with a broken anchor and a page left
out of the nav, must fail: that is what makes `--strict` worth running in `make test`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

#: Element ids mkdocstrings gives each documented object on the reference pages.
EXPECTED = {
    "reference/index.html": (
        "zae_limiter.RateLimiter",
        "zae_limiter.SyncRateLimiter",
        "zae_limiter.Limit",
        "zae_limiter.RateLimiter.acquire",
        "zae_limiter.SyncRateLimiter.acquire",
        "zae_limiter.Lease.adjust",
        "zae_limiter.SyncLease.adjust",
        "zae_limiter.ZaeLimiterError",
        "zae_limiter.RateLimitExceeded",
        "zae_limiter.RateLimiterUnavailable",
        "zae_limiter.ValidationError",
        "zae_limiter.SchemaVersionError",
        "zae_limiter.EntityNotFoundError",
        "zae_limiter.TableNotFoundError",
        "zae_limiter.Repository.open",
    ),
    "reference/asgi/index.html": (
        "zae_limiter.asgi.RateLimitMiddleware",
        "zae_limiter.asgi.Guard",
        "zae_limiter.asgi.lease_of",
    ),
    "reference/testing/index.html": ("zae_limiter.testing.PartitionEmulator",),
}


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
    return subprocess.run(
        [*command, "--site-dir", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_site_builds_and_the_reference_names_the_public_api(tmp_path: Path) -> None:
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    for page, ids in EXPECTED.items():
        html = (tmp_path / "site" / page).read_text()
        missing = [name for name in ids if f'id="{name}"' not in html]
        assert not missing, f"{page} lacks {missing}"
    # A docstring's own words reach the page, not only the names.
    from zae_limiter import Lease

    assert Lease.adjust.__doc__
    summary = Lease.adjust.__doc__.strip().split("\n")[0]
    assert summary in (tmp_path / "site/reference/index.html").read_text()


def test_a_broken_anchor_or_a_page_outside_the_nav_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "index.md").open("a") as index:
        index.write("\nSee [nowhere](deploy.md#no-such-heading).\n")
    (docs / "stray.md").write_text("# A page nobody put in the nav\n")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["docs_dir"] = str(docs)
    # The copy's config sits in tmp_path: name the sources by their absolute path.
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT / "src")]
    written = tmp_path / "mkdocs.yml"
    written.write_text(yaml.safe_dump(config))
    done = build(written, tmp_path / "site")
    assert done.returncode != 0
    # Each fault on its own is a warning, and under --strict a warning fails the build.
    # A log record starts with its level; a list of pages goes on over the lines after it.
    records = re.split(r"^(?=[A-Z]+ +- )", done.stderr, flags=re.MULTILINE)
    warnings = "".join(record for record in records if record.startswith("WARNING"))
    assert "no-such-heading" in warnings
    assert "stray.md" in warnings
