"""Build the aggregator Lambda's zip from the installed package's own files.

The zip is byte-for-byte reproducible (sorted entries, fixed timestamps and modes), so
its digest names the S3 object and a deploy only updates the Lambda when code changed.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

from zae_limiter.infra.render import package_version

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# Templates are for deploying, not for the function; caches differ per machine.
_EXCLUDED_DIRS = frozenset({"__pycache__", "templates"})
_EXCLUDED_SUFFIXES = (".pyc", ".pyo")


def package_root() -> Path:
    """The directory of the `zae_limiter` package that is running now."""
    return Path(__file__).resolve().parent.parent


def package_files(root: Path | None = None) -> list[Path]:
    root = root or package_root()
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and not _EXCLUDED_DIRS.intersection(path.relative_to(root).parts)
        and not path.name.endswith(_EXCLUDED_SUFFIXES)
    )


def build_aggregator_zip(root: Path | None = None) -> bytes:
    """A zip with `zae_limiter/...` at its top level, as Lambda's python runtime wants."""
    root = root or package_root()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in package_files(root):
            arcname = (Path(root.name) / path.relative_to(root)).as_posix()
            info = zipfile.ZipInfo(arcname, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def artifact_key(data: bytes) -> str:
    """The S3 key of a zip: versioned for people, content-addressed for CloudFormation."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"zae-limiter/{package_version()}/aggregator-{digest}.zip"
