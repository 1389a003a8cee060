"""The examples in docs/reserves.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

from moto import mock_aws

DOC = Path(__file__).resolve().parents[2] / "docs" / "reserves.md"


def test_reserves_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks
    with mock_aws():
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), {})
