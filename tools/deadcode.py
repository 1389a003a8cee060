"""Dead code in the package: `python -m tools.deadcode` (vulture, at 60% confidence).

The package, its tests, benchmarks, tools and examples are read together, so a function
only a test calls counts as used; findings are reported for the package alone. Names
that only a framework or a template uses are listed in tools/deadcode_allow.txt, with the
reason. Unused arguments of `__exit__`-style signatures and signal handlers are allowed
(`_`-prefixed names are vulture's convention for them too). Exit 1 on any finding.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("src/zae_limiter", "tests", "benchmarks", "tools", "examples")
ALLOW = ROOT / "tools" / "deadcode_allow.txt"
#: click registers commands by decorator; a context manager's and a signal handler's
#: arguments are given whether used or not.
IGNORE_DECORATORS = ["@*.command", "@*.group", "@click.*"]
IGNORE_NAMES = ["exc_type", "exc", "tb", "signum", "frame", "*_command"]
MIN_CONFIDENCE = 60


def findings(root: Path = ROOT) -> list[str]:
    from vulture import Vulture

    scan = Vulture(ignore_names=IGNORE_NAMES, ignore_decorators=IGNORE_DECORATORS)
    scan.scavenge([root / p for p in SCANNED if (root / p).exists()] + [ALLOW])
    package = (root / "src" / "zae_limiter").resolve()
    out = []
    for item in scan.get_unused_code(min_confidence=MIN_CONFIDENCE):
        path = Path(item.filename).resolve()
        if path.is_relative_to(package):
            out.append(item.get_report().replace(str(root.resolve()) + "/", ""))
    return out


def main() -> int:
    found = findings()
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} dead code findings: remove them, or say in {ALLOW.name} why not")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
