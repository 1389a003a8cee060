"""The examples in docs/quotas.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "quotas.md"


def test_quota_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 7
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})
