"""`python -m benchmarks regions [--seconds S] [--lag-ms MS]`: one global limit across three
regions on the local multi-region engine (`local up --regions` with moto's server).

Four runs of the same offer (1.5x a 300/s limit, demand 80/10/10% moving to 10/10/80% at
a third of the run): regional shares; regional shares with eu-west-1 partitioned for a
third of the run; independent regional limits (each region the whole limit); one home
region's table (every region writes to us-east-1). Exits 1 when the shares runs admit
past one ideal bucket of the whole limit, or serve less than 95% of min(offered, limit)
outside the seconds after a shift (5 s plus the lag).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

from benchmarks import regional_plot
from benchmarks.regional import Analysis, Scenario, analyse, run_scenario
from zae_limiter.local import regions as local_regions

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")
INSTANCE = "bench-regions"
#: Admissions past the ideal bucket tolerated: a take's clock is read a moment before
#: its write lands, so two concurrent takes can land in the other order (1 token).
TOLERANCE_TOKENS = 1.0
SERVED_FLOOR = 0.95
#: A run whose acquires failed (engine errors, not rejections) more often says nothing.
MAX_ERROR_SHARE = 0.01


#: The runs: name -> (mode, a region partitioned, the home region).
RUNS: dict[str, tuple[str, bool, str | None]] = {
    "shares": ("shares", False, None),
    "partition": ("shares", True, None),
    "independent": ("independent", False, None),
    "home": ("home", False, "us-east-1"),
}


def scenario(seconds: float, lag_ms: int, partitioned: bool, limit: int = 300) -> Scenario:
    shift = seconds / 3
    return Scenario(
        regions=REGIONS,
        limit_per_second=limit,
        seconds=seconds,
        schedule=((0.0, (0.8, 0.1, 0.1)), (shift, (0.1, 0.1, 0.8))),
        partition=("eu-west-1", shift + 10 * seconds / 90, shift + 40 * seconds / 90)
        if partitioned
        else None,
        lag_ms=lag_ms,
    )


def _row(a: Analysis) -> str:
    return (
        f"| {a.mode} | {a.offered} | {a.admitted} | {a.over_admitted:.1f} | "
        f"{100 * a.served:.1f}% | {100 * a.worst_second:.1f}% | {a.p50_ms:.1f} | {a.p99_ms:.1f} "
        f"| {a.requests_per_acquire:.3f} | {a.keeper_requests_per_acquire:.3f} |"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _per_second(a: Analysis) -> list[str]:
    head = " | ".join(f"{r} share / offered / admitted / released / absorbed" for r in REGIONS)
    lines = [
        f"| s | offered | admitted | shares held | in flight | {head} |",
        "|---|---|---|---|---|" + "---|" * len(REGIONS),
    ]
    for row in a.per_second:
        cells = " | ".join(
            f"{_pct(row['shares'][r])} / {row['offered_by_region'][r]} / {row['admitted'][r]} / "
            f"{_pct(row['released'].get(r))} / {_pct(row['absorbed'].get(r))}"
            for r in REGIONS
        )
        mark = " (excluded)" if row["second"] in a.excluded else ""
        total = sum(row["admitted"].values())
        lines.append(
            f"| {row['second']}{mark} | {row['offered']} | {total} | {_pct(row['share_sum'])} "
            f"| {_pct(row['in_flight'])} | {cells} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks regions")
    parser.add_argument("--seconds", type=float, default=90.0, help="length of each run (90)")
    parser.add_argument("--lag-ms", type=int, default=1000, help="replication lag (1000)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--quick", action="store_true", help="30 s runs")
    parser.add_argument(
        "--limit",
        type=int,
        default=300,
        help="the global limit per second (300; capacity the same)",
    )
    parser.add_argument(
        "--engine",
        choices=("dynamodb-local", "moto"),
        default="moto",
        help=(
            "each region's engine (moto's server, default: three DynamoDB Local JVMs starve "
            "the load generator on a 2-core machine, docs/global.md)"
        ),
    )
    parser.add_argument(
        "--runs",
        default=",".join(RUNS),
        help=f"which runs, comma-separated (all: {','.join(RUNS)})",
    )
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = sorted(set(runs) - set(RUNS))
    if unknown:
        parser.error(f"unknown runs {unknown}; choose from {', '.join(RUNS)}")
    seconds = 30.0 if args.quick else args.seconds
    local_regions.up_regions(args.engine, REGIONS, instance=INSTANCE, lag_ms=args.lag_ms)
    try:
        local_regions.wait_replicating(INSTANCE)
        envs = {r: local_regions.region_env(r, INSTANCE) for r in REGIONS}
        endpoints = {r: env["AWS_ENDPOINT_URL"] for r, env in envs.items()}
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ACCOUNT_ID_ENDPOINT_MODE"):
            if name in envs[REGIONS[0]]:
                os.environ[name] = envs[REGIONS[0]][name]

        def cut(region: str, on: bool) -> None:
            local_regions.partition(region, on, INSTANCE)

        results = []
        for name in runs:
            mode, partitioned, home = RUNS[name]
            table = f"bench-regions-{uuid.uuid4().hex[:6]}"
            run = run_scenario(
                scenario(seconds, args.lag_ms, partitioned, args.limit),
                mode,
                endpoints,
                table,
                cut,
                home,
            )
            analysis = analyse(run)
            analysis.mode = mode + (" + partition" if partitioned else "")
            results.append((analysis, run.errors))
            print(
                f"{analysis.mode}: done ({len(run.errors)} errors, refused by why "
                f"{run.refused}, {run.transfers} transfers, {run.keeper_failures} failed "
                f"keeper passes {run.keeper_error[:300]!r})",
                flush=True,
            )
    finally:
        local_regions.down_regions(INSTANCE)
    return report(results, args.out, seconds, args.lag_ms, args.limit)


def report(
    results: list[tuple[Analysis, list[str]]], out: Path, seconds: float, lag: int, limit: int
) -> int:
    lines = [
        f"## One global limit of {limit}/s across regions ({seconds:.0f} s runs, lag {lag} ms,"
        f" offered {1.5 * limit:.0f}/s intended)",
        "",
        "| run | offered | admitted | past one ideal bucket (tokens) | served outside shifts "
        "| worst second | p50 ms | p99 ms | requests per acquire | keeper requests per acquire |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(_row(a) for a, _ in results),
    ]
    out.mkdir(parents=True, exist_ok=True)
    for a, errors in results:
        if a.mode.startswith("shares"):
            slug = a.mode.replace(" + ", "-").replace(" ", "-")
            plot = regional_plot.write(
                out / f"regions-{slug}.svg", f"{a.mode}: {limit}/s across {len(REGIONS)} "
                f"regions, lag {lag} ms", a.per_second, REGIONS, limit, a.excluded,
            )  # fmt: skip
            lines += ["", f"### {a.mode}: shares and admitted per region per second", ""]
            lowest = _pct(a.lowest_share_sum)
            lines += [f"Refused by why: {a.refused or 'none'}; transfers written: {a.transfers};"]
            lines += [f"lowest sum of the shares held outside the shifts: {lowest}."]
            lines += [f"Plot: `{plot}`. Share: the region's parts of the whole limit, read"]
            lines += ["from its own item in its own replica at the end of each second (one"]
            lines += ["region after the other: a transfer between two reads can skew a sum);"]
            lines += ["released / absorbed: parts the region gave / took in during the second;"]
            lines += ["in flight: parts released and not absorbed yet.", ""]
            lines += _per_second(a)
        if errors:
            lines += ["", f"{a.mode}: {len(errors)} errors, first: {errors[0]}"]
    text = "\n".join(lines)
    print(text)
    (out / "regions.md").write_text(text + "\n")
    body = [{k: v for k, v in vars(a).items()} for a, _ in results]
    (out / "regions.json").write_text(json.dumps(body, indent=1) + "\n")
    failed = []
    for a, _ in results:
        if not a.mode.startswith("shares"):
            continue
        if a.over_admitted > TOLERANCE_TOKENS:
            failed.append(f"{a.mode} admitted {a.over_admitted:.1f} tokens past the ideal bucket")
        if a.served < SERVED_FLOOR and "partition" not in a.mode:
            failed.append(f"{a.mode} served {100 * a.served:.1f}% < 95% outside the shifts")
    for a, errors in results:
        if len(errors) > MAX_ERROR_SHARE * max(1, a.offered):
            failed.append(f"{a.mode}: {len(errors)} failed acquires (engine errors)")
    for failure in failed:
        print(f"failed: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
