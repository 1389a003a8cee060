"""Draw docs/top.svg: `zae-limiter top` over a small workload on an embedded engine.

    python examples/top/picture.py [docs/top.svg]

Starts moto's server, gives four tenants steady traffic of different rates (one with
token reserves, so its reserve shows), watches the stream for 12 seconds with the same
code the command runs, and saves the console as SVG.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from rich.console import Console

from zae_limiter import Limit, SyncRateLimiter, SyncRepository
from zae_limiter.cli.top import Session, now_ms, top_table
from zae_limiter.local import MOTO, LocalEngine, local_env
from zae_limiter.top.rates import Filters
from zae_limiter.top.reader import open_reader

TABLE = "gateway"
#: entity -> (acquires per second, tokens per acquire)
TRAFFIC = {"acme-prod": (12, 900), "globex": (6, 400), "initech": (3, 1500), "umbrella": (1, 200)}


def work(limiter: SyncRateLimiter, entity: str, per_second: float, tokens: int,
         stop: threading.Event) -> None:  # fmt: skip
    due = time.monotonic()
    while not stop.is_set():
        due += 1 / per_second
        with limiter.acquire(entity, "gpt-4o", {"rpm": 1, "tpm": tokens}):
            pass
        stop.wait(max(0.0, due - time.monotonic()))


def main(path: str) -> None:
    engine = LocalEngine.start(MOTO)
    try:
        url = engine.endpoint_url
        os.environ.update(local_env(url))
        repo = SyncRepository.open(name=TABLE, create_table=True, endpoint_url=url)
        limiter = SyncRateLimiter(repo)
        limiter.set_resource_defaults(
            "gpt-4o", [Limit.per_minute("rpm", 1200), Limit.per_minute("tpm", 1_000_000)]
        )
        session = Session(open_reader(TABLE, endpoint_url=url), Filters(), "pct", 10)
        stop = threading.Event()
        workers = [threading.Thread(target=work, args=(limiter, e, r, t, stop))
                   for e, (r, t) in TRAFFIC.items()]  # fmt: skip
        for worker in workers:
            worker.start()
        rows = session.run_for(12, 1.0)
        stop.set()
        for worker in workers:
            worker.join()
        console = Console(record=True, width=140, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(top_table(rows, session.reader, session.tally, now_ms()))
        console.save_svg(path, title="zae-limiter top --sort pct")
        repo.close()
    finally:
        engine.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/top.svg")
