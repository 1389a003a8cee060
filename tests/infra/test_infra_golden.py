"""Single-region templates are frozen: a change for global tables must not move them.

The golden files were rendered before global tables existed, with the package version
replaced by VERSION and the schema version by SCHEMA (a release or a schema bump should
not fail this test). Regenerate them only on
purpose, when a single-region change is meant to alter the template.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.infra._helpers import VARIANTS
from zae_limiter.infra.render import package_version, render_template
from zae_limiter.schema import SCHEMA_VERSION

GOLDEN = Path(__file__).parent / "golden"
#: The schema version's tag and output value.
_SCHEMA_VALUE = re.compile(r'(schema-version\n\s+Value: |deployed for\.\n\s+Value: )"\d+"')


@pytest.mark.parametrize("variant", sorted(p.stem for p in GOLDEN.glob("*.yaml")))
def test_single_region_template_is_unchanged(variant: str) -> None:
    rendered = render_template(VARIANTS[variant]).replace(package_version(), "VERSION")
    rendered = rendered.replace(f"schema version {SCHEMA_VERSION}", "schema version SCHEMA")
    rendered = _SCHEMA_VALUE.sub(r'\1"SCHEMA"', rendered)
    assert rendered == (GOLDEN / f"{variant}.yaml").read_text()
