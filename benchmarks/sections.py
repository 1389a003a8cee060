"""A section of `make bench` that keeps its own JSON next to the report (web, reserves, cpu)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Log = Callable[[str], None]
#: (out_dir, quick, log, failures) -> the section's JSON-ready figures.
Measure = Callable[[Path, bool, Log, list[str]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    measure: Measure
    #: The markdown for the report, from the figures (or from {"note": "failed: ..."}).
    render: Callable[[dict[str, Any]], str]

    def run(
        self,
        out_dir: Path,
        quick: bool,
        sections: tuple[str, ...],
        log: Log,
        failures: list[str] | None = None,
    ) -> dict[str, str]:
        """Markdown by section name, {} when skipped. A failure is shown in the report and
        added to `failures`, so the other sections still run and the command fails at the end."""
        if self.name not in sections:
            return {}
        failed = [] if failures is None else failures
        log(f"[bench] {self.name} ...")
        started = time.monotonic()
        try:
            data = self.measure(out_dir, quick, log, failed)
        except Exception as error:
            why = f"{type(error).__name__}: {error}"
            failed.append(f"{self.name}: {why}")
            data = {"note": f"failed: {why}"}
        data["seconds"] = round(time.monotonic() - started, 1)
        log(f"[bench] {self.name} done in {data['seconds']:.0f}s")
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{self.name}.json").write_text(json.dumps(data, indent=2) + "\n")
        return {self.name: self.render(data)}
