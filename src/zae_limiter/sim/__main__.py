"""`python -m zae_limiter.sim`: search seeds, or replay one with its trace.

    python -m zae_limiter.sim --seeds 10000 [--start 0] [--jobs 2] [--seconds 60]
    python -m zae_limiter.sim --seed 258          # shrunk and traced when it fails
    python -m zae_limiter.sim --kinds crash,lost-answer --seeds 1000

Exit 0 when no schedule broke a guarantee, 1 when one did (its seeds are listed), 2 on
bad options.
"""

from __future__ import annotations

import argparse
import sys
import time

from zae_limiter.sim.search import ALL_KINDS, default_jobs, explain, report, search
from zae_limiter.sim.spec import FAULT_KINDS


def _kinds(text: str) -> frozenset[str]:
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(kinds - ALL_KINDS)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {unknown}; choose from {', '.join(FAULT_KINDS)}"
        )
    return kinds


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m zae_limiter.sim",
        description="The deterministic fault simulator (docs/simulator.md).",
    )
    parser.add_argument("--seed", type=int, help="replay this seed alone, with its trace")
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to search")
    parser.add_argument("--start", type=int, default=0, help="the first seed searched")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="processes")
    parser.add_argument("--seconds", type=float, help="stop starting seeds after this long")
    parser.add_argument(
        "--kinds", type=_kinds, default=ALL_KINDS, help="fault kinds drawn (default: all)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.seed is not None:
        outcome = explain(args.seed, args.kinds)
        print(outcome.trace)
        for violation in outcome.violations:
            print(f"VIOLATION {violation}")
        print(f"seed {args.seed}: {'FAILED' if outcome.failed else 'passed'}")
        return 1 if outcome.failed else 0
    started = time.monotonic()
    tally = search(args.start, args.seeds, jobs=args.jobs, seconds=args.seconds,
                   kinds=args.kinds)  # fmt: skip
    print(report(tally, time.monotonic() - started))
    if tally.failures:
        print(f"replay one: python -m zae_limiter.sim --seed {tally.failures[0][0]}")
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
