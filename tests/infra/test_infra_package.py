"""The aggregator zip: the package's own files, reproducible byte for byte."""

from __future__ import annotations

import io
import zipfile

from zae_limiter.infra.package import (
    artifact_key,
    build_aggregator_zip,
    package_files,
    package_root,
)
from zae_limiter.infra.render import package_version


def test_zip_holds_the_package_and_nothing_else() -> None:
    names = zipfile.ZipFile(io.BytesIO(build_aggregator_zip())).namelist()
    assert "zae_limiter/__init__.py" in names
    assert "zae_limiter/table.py" in names
    assert "zae_limiter/infra/package.py" in names
    assert all(name.startswith("zae_limiter/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert not any(name.startswith("zae_limiter/templates/") for name in names)
    assert len(names) == len(package_files(package_root()))


def test_zip_is_reproducible_and_names_its_key() -> None:
    first, second = build_aggregator_zip(), build_aggregator_zip()
    assert first == second
    key = artifact_key(first)
    assert key.startswith(f"zae-limiter/{package_version()}/aggregator-")
    assert key.endswith(".zip")
    assert artifact_key(first + b"x") != key
