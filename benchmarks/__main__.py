"""`python -m benchmarks [--out DIR] [--quick] [--skip SECTION]`: run, write, print.
`python -m benchmarks sim [--schedules N] [--seconds S]`: the fault simulator's search.
`python -m benchmarks regions [--seconds S] [--quick]`: one global limit across regions."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from benchmarks import suite


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Capacity, cost, latency and hot-entity benchmarks on local engines.",
    )
    parser.add_argument(
        "--out", type=Path, default=suite.DEFAULT_OUT, help="report directory (bench-results)"
    )
    parser.add_argument("--quick", action="store_true", help="shorter runs (about a minute)")
    parser.add_argument(
        "--skip", action="append", default=[], choices=suite.SECTIONS, help="skip a section"
    )
    parser.add_argument(
        "--capacity-engine",
        choices=("dynamodb-local", "moto"),
        default=None,
        help="force the capacity engine (default: DynamoDB Local when installed)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["sim"]:  # `python -m benchmarks sim ...`: the simulator's search alone
        from benchmarks import sim

        return sim.main(given[1:])
    if given[:1] == ["regions"]:  # one global limit across regions (docs/global.md)
        from benchmarks import regional_bench

        return regional_bench.main(given[1:])
    args = parse(argv)
    shown = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m benchmarks", *map(shlex.quote, shown)])
    sections = tuple(s for s in suite.SECTIONS if s not in args.skip)
    report = suite.run(
        args.out, args.quick, sections, command, capacity_engine=args.capacity_engine
    )
    md, js = report.write(args.out)
    print()
    print(report.to_markdown())
    print(f"written: {md} and {js}")
    failed = False
    if report.capacity is not None and report.capacity.mismatches:
        print("capacity differs from the budget: " + ", ".join(
            p.budget.key for p in report.capacity.mismatches
        ))  # fmt: skip
        failed = True
    for failure in report.failures:
        print(f"failed: {failure}", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
