"""A process that forgets to close returns its token reserves when the interpreter exits;
one that dies returns nothing, and its tokens are lost, never created. Real processes
against a moto server."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from zae_limiter import Limit, SyncRateLimiter, SyncRepository

SLOW = [Limit.custom("rpm", 100, 1, 3600)]

PROGRAM = """
import asyncio, os, sys
from zae_limiter import Limit, RateLimiter, Repository, SyncRateLimiter, SyncRepository
SLOW = [Limit.custom("rpm", 100, 1, 3600)]
endpoint, table, face, ending = sys.argv[1:5]

if face == "sync":
    limiter = SyncRateLimiter(SyncRepository.open(name=table, endpoint_url=endpoint))
    for _ in range(10):
        with limiter.acquire("k", "gpt", {"rpm": 1}, limits=SLOW):
            pass
    held = limiter.get_reserve_stats().held.get("rpm", 0)
else:
    async def main():
        repo = await Repository.open(name=table, endpoint_url=endpoint)
        limiter = RateLimiter(repo)
        for _ in range(10):
            async with limiter.acquire("k", "gpt", {"rpm": 1}, limits=SLOW):
                pass
        return limiter.get_reserve_stats().held.get("rpm", 0)
    held = asyncio.run(main())
print(held, flush=True)
if ending == "crash":
    os._exit(0)  # no atexit hooks: as if the process were killed
"""


@pytest.mark.parametrize("face", ["sync", "async"])
@pytest.mark.parametrize("ending", ["exit", "crash"])
def test_reserves_at_interpreter_exit(
    moto_http: str, table_name: str, face: str, ending: str
) -> None:
    repo = SyncRepository.open(name=table_name, endpoint_url=moto_http, create_table=True)
    limiter = SyncRateLimiter(repo)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM), moto_http, table_name, face, ending],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    held = int(done.stdout.split()[-1])
    assert held > 0  # the child held a reserve when it ended
    shards = limiter.get_shards("k", "gpt")
    tokens = sum(s.tokens["rpm"] for s in shards)
    if ending == "exit":
        assert sum(s.reserved.get("rpm", 0) for s in shards) == 0
        assert tokens == 100 - 10
    else:
        assert tokens == 100 - 10 - held  # lost with the process, never created
    repo.close()
