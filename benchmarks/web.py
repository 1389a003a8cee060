"""The web front under load: requests per second through the reference gateway, and the
latency its middleware adds at p50/p99 against the same app without it.

Both apps (examples/gateway, with and without `RateLimitMiddleware`) run under uvicorn,
each in its own process, on a moto server; this process drives them over HTTP with httpx,
closed loop (each worker sends its next request when the last answered). Limits never
bind, so every request is admitted: the figures are the cost of the acquire, the headers
and the adjustment write on every request. Needs a checkout (examples/) and the web extra.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.engines import MOTO, create_table, running
from benchmarks.latency import percentile
from benchmarks.sections import Log, Section

REPO_ROOT = Path(__file__).resolve().parents[1]
APP = "examples.gateway.app"
ROUTE = "/v1/chat/completions"
KEYS = 50
WARMUP_REQUESTS = 2 * KEYS  # every key once past its first acquire
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
MODEL = "bench-model"
BODY = {"model": MODEL, "max_tokens": 64,
        "messages": [{"role": "user", "content": "say something short"}]}  # fmt: skip


@dataclass(frozen=True, slots=True)
class WebResult:
    app: str  # "gateway" (with the middleware) or "baseline" (without)
    workers: int
    requests: int
    errors: int
    wall_seconds: float
    p50_ms: float
    p99_ms: float
    #: CPU of the app's server process per request (Linux /proc; 0 where unknown).
    server_cpu_ms: float = 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.wall_seconds if self.wall_seconds else 0.0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux); 0 where /proc is not there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class _Server:
    url: str
    pid: int


@contextmanager
def _serve(target: str, env: dict[str, str], factory: bool = False) -> Iterator[_Server]:
    """`target` under uvicorn in its own process."""
    import httpx

    port = _free_port()
    command = [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning"]  # fmt: skip
    if factory:
        command.append("--factory")
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"uvicorn {target} exited with {proc.returncode}")
            try:
                if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn {target} did not answer") from None
                time.sleep(0.1)
        yield _Server(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _measure(server: _Server, app: str, workers: int, seconds: float) -> WebResult:
    cpu = _cpu_seconds(server.pid)
    result = asyncio.run(_drive(server.url, app, workers, seconds))
    used = _cpu_seconds(server.pid) - cpu
    per_request = 1000 * used / result.requests if result.requests else 0.0
    return replace(result, server_cpu_ms=per_request)


async def _drive(url: str, app: str, workers: int, seconds: float) -> WebResult:
    import httpx

    times: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:

        async def one(n: int) -> bool:
            headers = {"Authorization": f"Bearer bench-key-{n % KEYS}"}
            started = time.perf_counter()
            answer = await http.post(ROUTE, json=BODY, headers=headers)
            times.append(time.perf_counter() - started)
            return answer.status_code == 200

        for n in range(WARMUP_REQUESTS):
            await one(n)
        times.clear()
        stop = time.perf_counter() + seconds

        async def worker(w: int) -> None:
            nonlocal errors
            n = w
            while time.perf_counter() < stop:
                if not await one(n):
                    errors += 1
                n += workers

        began = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(workers)))
        wall = time.perf_counter() - began
    ordered = sorted(times)
    p50, p99 = percentile(ordered, 50), percentile(ordered, 99)
    return WebResult(app, workers, len(times), errors, wall, p50, p99)


def _set_limits(endpoint_url: str, table: str) -> None:
    from zae_limiter import Limit, SyncRateLimiter, SyncRepository

    repo = SyncRepository.open(name=table, endpoint_url=endpoint_url)
    try:
        never_binding = [Limit.per_second("rpm", 1_000_000), Limit.per_second("tpm", 10**9)]
        SyncRateLimiter(repo).set_resource_defaults(MODEL, never_binding)
    finally:
        repo.close()


def run(seconds: float = 5.0, workers: tuple[int, ...] = (1, 8)) -> dict[str, Any]:
    """Baseline and gateway, alternately, at each concurrency; results and added latency."""
    if not (REPO_ROOT / "examples" / "gateway" / "app.py").exists():
        return {"note": "not available: needs a checkout with examples/gateway"}
    results: list[WebResult] = []
    with running(MOTO) as engine:
        table = create_table(engine.endpoint_url)
        _set_limits(engine.endpoint_url, table)
        env = {**os.environ, "ZAEL_NAME": table, "AWS_ENDPOINT_URL": engine.endpoint_url}
        with _serve(f"{APP}:app", env) as gateway, _serve(f"{APP}:baseline", env, True) as base:
            for count in workers:
                results.append(_measure(base, "baseline", count, seconds))
                results.append(_measure(gateway, "gateway", count, seconds))
    return {"results": [{**asdict(r), "rps": r.rps} for r in results], "added": _added(results)}


def _added(results: list[WebResult]) -> list[dict[str, float]]:
    by = {(r.app, r.workers): r for r in results}
    added = []
    for (app, count), guarded in sorted(by.items()):
        base = by.get(("baseline", count))
        if app == "gateway" and base is not None:
            added.append({
                "workers": count,
                "p50_ms": guarded.p50_ms - base.p50_ms,
                "p99_ms": guarded.p99_ms - base.p99_ms,
                "rps_ratio": guarded.rps / base.rps if base.rps else 0.0,
                "server_cpu_ms": guarded.server_cpu_ms - base.server_cpu_ms,
            })  # fmt: skip
    return added


def markdown(data: dict[str, Any]) -> str:
    title = "## Web front: the reference gateway over HTTP (uvicorn, moto server)"
    if "results" not in data:
        return f"{title}\n\n{data.get('note', 'not run')}"
    head = ("| app | workers | requests | errors | req/s | p50 ms | p99 ms | server CPU ms/req |\n"
            + "|---" * 8 + "|")  # fmt: skip
    rows = [
        f"| {r['app']} | {r['workers']} | {r['requests']} | {r['errors']} | {r['rps']:.0f} "
        f"| {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['server_cpu_ms']:.2f} |"
        for r in data["results"]
    ]
    added = [
        f"- {a['workers']} worker(s): the middleware adds {a['p50_ms']:.1f} ms at p50 and "
        f"{a['p99_ms']:.1f} ms at p99 and {a['server_cpu_ms']:.2f} ms of server CPU per "
        f"request; the gateway serves {a['rps_ratio']:.0%} of the baseline's requests per second"
        for a in data["added"]
    ]
    return "\n".join([title, "", head, *rows, "", *added])


def _measure_section(_out: Path, quick: bool, _log: Log, _failures: list[str]) -> dict[str, Any]:
    return run(seconds=2.0 if quick else 5.0)


SECTION = Section("web", _measure_section, markdown)
