"""`python -m zae_limiter.sim`: search seeds, or replay one with its trace.

    python -m zae_limiter.sim --seeds 10000 [--start 0] [--jobs 2] [--seconds 60]
    python -m zae_limiter.sim --seed 258          # shrunk and traced when it fails
    python -m zae_limiter.sim --kinds crash,lost-answer --seeds 1000
    python -m zae_limiter.sim --quotas --seeds 1000  # each world's first limit a quota
    python -m zae_limiter.sim --regions us,eu --active us  # replicated engines, one serving

Exit 0 when no schedule broke a guarantee, 1 when one did (its seeds are listed), 2 on
bad options.
"""

from __future__ import annotations

import argparse
import sys
import time

from zae_limiter.sim.search import ALL_KINDS, Worlds, default_jobs, explain, report, search
from zae_limiter.sim.spec import ALL_KINDS as KINDS


def _kinds(text: str) -> frozenset[str]:
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(kinds - ALL_KINDS)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {unknown}; choose from {', '.join(KINDS)}"
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
    parser.add_argument(
        "--quotas", action="store_true", help="make each world's first limit a quota"
    )
    parser.add_argument(
        "--regions", type=_names, default=(), help="regions, each with its engine, replicated"
    )
    parser.add_argument(
        "--active", type=_names, default=(), help="regions whose clients acquire (default: all)"
    )
    args = parser.parse_args(argv)
    if args.active and not set(args.active) <= set(args.regions):
        parser.error(f"--active {','.join(args.active)} names regions not in --regions")
    if len(args.regions) == 1:
        parser.error("--regions needs two regions or more (one region is the default world)")
    return args


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a region is named twice in {text!r}")
    return names


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    worlds = Worlds(args.kinds, args.quotas, args.regions, args.active)
    if args.seed is not None:
        outcome = explain(args.seed, worlds)
        if outcome.spec.focus:
            print(f"focused world: {outcome.spec.focus} (sim/focus.py)")
        print(outcome.trace)
        for violation in outcome.violations:
            print(f"VIOLATION {violation}")
        print(f"seed {args.seed}: {'FAILED' if outcome.failed else 'passed'}")
        return 1 if outcome.failed else 0
    started = time.monotonic()
    tally = search(args.start, args.seeds, jobs=args.jobs, seconds=args.seconds, worlds=worlds)
    print(report(tally, time.monotonic() - started))
    if tally.failures:
        seed = tally.failures[0][0]
        print(f"replay one: python -m zae_limiter.sim --seed {seed}{worlds.again()}")
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
