"""The whole examples in docs/controls.md (those that open their own limiter) run as
written, on in-process moto, and print what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from moto import mock_aws

DOC = Path(__file__).resolve().parents[2] / "docs" / "controls.md"


def test_controls_examples_run_and_print_what_they_say() -> None:
    blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
        if b.startswith("from zae_limiter")
    ]
    assert len(blocks) == 2
    for block in blocks:
        said = [
            line.split("# ", 1)[1].strip()
            for line in block.splitlines()
            if line.startswith("print(") and "# " in line
        ] + [line[2:].strip() for line in block.splitlines() if line.startswith("# {")]
        out = io.StringIO()
        with mock_aws(), contextlib.redirect_stdout(out):
            exec(compile(block, str(DOC), "exec"), {})
        printed = out.getvalue()
        for expected in said:
            assert expected in printed, (expected, printed)
