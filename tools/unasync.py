"""Generate each sync face from its async twin, where the two differ only by `await`.

A module holds the pair between three marker lines:

    # unasync: source
    class Lease(...):            # the async face: edit this one
    # unasync: generated
    class SyncLease(...):        # written by this tool: never edit
    # unasync: end

The generated part is the source with the rules below applied, word by word, less the
lines that end with `# unasync: async only` (what the async face alone has). Run
`python -m tools.unasync` after changing a source part; `--check` (what
tests/unit/test_unasync.py does) fails when a generated part is not what the source gives.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "zae_limiter"
#: Modules holding generated faces (relative to the package).
FILES = (
    "drivers.py",
    "identity.py",
    "lease.py",
    "limiter.py",
    "regional.py",
    "repository.py",
    "reserve_keeper.py",
    "wire/client.py",
)

SOURCE = "# unasync: source\n"
GENERATED = "# unasync: generated from the source above by tools/unasync.py; do not edit\n"
END = "# unasync: end\n"
#: A source line ending with this is the async face's alone: the generated part drops it
#: (the async lean call's `deadline`, which a blocking socket has no use for).
ASYNC_ONLY = "# unasync: async only"

#: (pattern, replacement), applied in order to the source part.
RULES: tuple[tuple[str, str], ...] = (
    (r"\bAsyncExitStack\b", "ExitStack"),
    (r"\basynchronous=True\b", "asynchronous=False"),
    (r"\b_async_", "_sync_"),
    (r"\basync def ", "def "),
    (r"\basync with ", "with "),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\basync_face\b", "sync_face"),
    (r"\basync_principal\b", "sync_principal"),
    (r"\b_Async", "_Sync"),
    (r"\bAsync(Acquiring|Keeper|Runner|LeanClient|Transport)\b", r"Sync\1"),
    (r"\b(RateLimiter|Repository|Lease|GlobalShares)\b", r"Sync\1"),
    (r"\bAsync\b", "Sync"),
    (r"\baiobotocore\b", "boto3"),
)


def unasync(source: str) -> str:
    lines = source.splitlines(keepends=True)
    source = "".join(line for line in lines if not line.rstrip().endswith(ASYNC_ONLY))
    for pattern, replacement in RULES:
        source = re.sub(pattern, replacement, source)
    return source


def regenerate(text: str, where: str) -> str:
    """The module's text with every generated part rewritten from its source part."""
    out: list[str] = []
    rest = text
    while SOURCE in rest:
        head, _, rest = rest.partition(SOURCE)
        source, found, rest = rest.partition(GENERATED)
        if not found:
            raise SystemExit(f"{where}: a source part without its generated part")
        _old, found, rest = rest.partition(END)
        if not found:
            raise SystemExit(f"{where}: a generated part without its end marker")
        out += [head, SOURCE, source, GENERATED, unasync(source), END]
    return "".join(out) + rest


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name in FILES:
        path = PACKAGE / name
        text = path.read_text()
        fresh = regenerate(text, name)
        if fresh != text:
            stale.append(name)
            if not check:
                path.write_text(fresh)
    if check and stale:
        print(f"generated faces out of date in {', '.join(stale)}: run python -m tools.unasync")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
