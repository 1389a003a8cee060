"""The demo's order of play: engine, table, story, live workload, shards, usage, summary."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Sequence

from rich.console import Console

from zae_limiter.demo import scenario, steps, view, workload
from zae_limiter.errors import ZaeLimiterError
from zae_limiter.limiter import SyncRateLimiter
from zae_limiter.local import LocalEngine, LocalEngineError
from zae_limiter.repository import SyncRepository

TABLE = "demo"
DEFAULT_SECONDS = 12.0
#: Extra seconds the workload may run while the hot tenant has not doubled yet.
DOUBLING_GRACE = 20.0
#: Whose usage the demo shows after draining the stream.
USAGE_OF = (
    (scenario.PROJECT, " (its own calls and its keys' cascaded ones)"),
    (scenario.HOT, ""),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m zae_limiter.demo",
        description="Run zae-limiter end to end against an embedded local DynamoDB engine.",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=DEFAULT_SECONDS,
        help=f"length of the live workload (default {DEFAULT_SECONDS:.0f})",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no live view, no entity table, no 429 body"
    )
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = view.View(Console(), args.quiet)
    started = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run(out, args.seconds, started)
    except KeyboardInterrupt:
        out.line("interrupted: the workload is stopped and the engine is shut down", "yellow")
        return 130
    except LocalEngineError as error:
        out.line(f"could not start the local engine: {error}", "red")
        return 1
    except ZaeLimiterError as error:
        out.line(f"the demo stopped on an error: {type(error).__name__}: {error}", "red")
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops the demo like Ctrl-C does, so the engine is shut down either way."""
    raise KeyboardInterrupt


def run(out: view.View, seconds: float, started: float) -> int:
    out.step(1, "start the embedded engine (moto)")
    os.environ.pop("AWS_PROFILE", None)
    with LocalEngine.start(engine="moto") as engine:
        os.environ.update(engine.env())
        url = engine.endpoint_url
        out.line(
            f"moto server on {url} (pid {engine.pid}), up in {time.monotonic() - started:.1f}s"
        )
        out.step(2, f"create the table {TABLE!r}")
        out.line(steps.create_table(url, TABLE))
        limiter = SyncRateLimiter(SyncRepository.open(name=TABLE, endpoint_url=url))
        try:
            burst = story(out, limiter)
        finally:
            limiter.repository.close()
        stats = live_workload(out, url, seconds)
        failed = [] if show_shards(out, url, stats) else ["5. entity shards show"]
        if not show_usage(out, url):
            failed.append("6. usage from the aggregator")
        out.step(7, "summary")
        out.show(view.summary_table(stats, burst, started))
        out.line("stopping the engine ...")
    out.line(f"engine stopped; the demo took {time.monotonic() - started:.1f}s")
    return verdict(out, failed)


def verdict(out: view.View, failed: Sequence[str]) -> int:
    """0 when every step worked; else say which did not, and exit 1 (CI must see it)."""
    if not failed:
        return 0
    out.line(f"the demo ran, but these steps failed: {'; '.join(failed)}", "bold red")
    return 1


def story(out: view.View, limiter: SyncRateLimiter) -> scenario.Burst:
    """Entities and limits, one estimated-then-adjusted call, and a burst that is refused."""
    out.step(3, "an LLM gateway: a project, its keys, and a batch tenant")
    out.detail(view.entities_table(scenario.create_entities(limiter)))
    for line in view.one_call_lines(scenario.one_call(limiter)):
        out.line(line)
    burst = scenario.burst(limiter)
    out.line(view.burst_line(burst), "bold red" if burst.rejected_at else None)
    if burst.body is not None:
        out.detail(view.burst_body(burst))
    return burst


def live_workload(out: view.View, url: str, seconds: float) -> workload.Stats:
    out.step(4, f"live workload for {seconds:.0f}s: gateway keys and a hot tenant")
    out.line(
        f"{scenario.HOT}'s clients set partition_wcu={scenario.HOT_PARTITION_WCU}: past 80% "
        f"of that write rate on a shard, the client doubles the shard count"
    )
    stats = workload.Stats()
    opener = workload.open_limiter(url, TABLE)
    with out.live(lambda: view.live_view(stats, seconds)) as redraw:
        with workload.running(opener, stats) as stop:
            while keep_going(stats, seconds) and not stop.is_set():
                time.sleep(0.25)
                redraw()
        # Drawn once more after the workers stopped: the calls in flight at the stop count,
        # and the table adds up to the totals printed below it.
        redraw()
    with workload.opened(opener) as watcher:
        stats.see_shards(watcher.get_shards(scenario.HOT, scenario.RESOURCE))
    totals = stats.totals
    out.line(
        f"workload: {totals.admitted} admitted, {totals.rejected} rejected "
        f"(longest retry after {totals.max_retry_after:.2f}s), {totals.errors} errors"
    )
    for line in view.doubling_lines(stats):
        out.line(line)
    out.show(view.shard_line(stats))
    return stats


def keep_going(stats: workload.Stats, seconds: float) -> bool:
    """Run `seconds`; on a slow machine, a little longer until the hot tenant doubled."""
    elapsed = stats.elapsed()
    if elapsed < seconds:
        return True
    return stats.shard_count < 2 and elapsed < seconds + DOUBLING_GRACE


def show_shards(out: view.View, url: str, stats: workload.Stats) -> bool:
    """Step 5; False when the CLI command failed or is missing (the shards are drawn
    here instead, but the step did not do what it says)."""
    out.step(5, f"zae-limiter entity shards show {scenario.HOT}")
    if steps.shards_show(url, TABLE, scenario.HOT, scenario.RESOURCE):
        out.line("(the CLI command above ran in-process)", "dim")
        return True
    out.line("`entity shards show` did not run; drawing the shards here", "red")
    out.show(view.shards_table(stats.shards))
    return False


def show_usage(out: view.View, url: str) -> bool:
    """Step 6; False when draining the stream or a usage summary failed (or is missing)."""
    out.step(6, "usage from the aggregator")
    drained = steps.drain_stream(url, TABLE)
    if drained is None:
        out.line(
            "the aggregator step is not available "
            "(needs `zae-limiter aggregator run --once` and `zae-limiter usage summary`)",
            "red",
        )
        return False
    if not drained:
        out.line("`aggregator run --once` failed (see the line above)", "red")
        return False
    ok = True
    for entity_id, note in USAGE_OF:
        out.line(f"usage of {entity_id} on {scenario.RESOURCE}{note}:", "bold")
        if not steps.usage_summary(url, TABLE, entity_id, scenario.RESOURCE):
            out.line("`usage summary` could not run (see the line above)", "red")
            ok = False
    return ok
