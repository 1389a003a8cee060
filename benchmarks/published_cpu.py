# mypy: ignore-errors
# (written against the published API of zae-limiter, not against this package)
"""Run by `benchmarks.cpu` in a separate virtualenv holding the published zae-limiter: client
CPU per steady acquire of that version, printed as one JSON line. Not imported by the
library (it targets the published API, not this one)."""

import asyncio
import json
import sys
import time
import uuid
import warnings

warnings.simplefilter("ignore")

from zae_limiter import Limit, RateLimiter, Repository, SyncRateLimiter, SyncRepository  # noqa: E402


def main(url: str, face: str, calls: int, warmup: int, rounds: int) -> None:
    name = f"zael-pub-{uuid.uuid4().hex[:8]}"
    limits = [Limit.per_second("rps", 1_000_000)]
    # The table alone: the published stack template does not deploy on moto.
    repo = SyncRepository(
        name, region="us-east-1", endpoint_url=url, _skip_deprecation_warning=True
    )
    repo.create_table()
    if face == "sync":
        limiter = SyncRateLimiter(repository=repo)

        def one() -> None:
            with limiter.acquire("bench-user", "bench", {"rps": 1}, limits=limits):
                pass

        for _ in range(warmup):
            one()
        took = []
        for _ in range(rounds):
            start = time.process_time()
            for _ in range(calls):
                one()
            took.append(time.process_time() - start)
    else:

        async def run() -> list:
            arepo = Repository(
                name, region="us-east-1", endpoint_url=url, _skip_deprecation_warning=True
            )
            limiter = RateLimiter(repository=arepo)

            async def one() -> None:
                async with limiter.acquire("bench-user", "bench", {"rps": 1}, limits=limits):
                    pass

            for _ in range(warmup):
                await one()
            took = []
            for _ in range(rounds):
                start = time.process_time()
                for _ in range(calls):
                    await one()
                took.append(time.process_time() - start)
            return took

        took = asyncio.run(run())
    print(json.dumps({"rounds": [1000 * cpu / calls for cpu in took], "calls": calls}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
