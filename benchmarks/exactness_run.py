# mypy: ignore-errors
# (drives this library or the published one, whichever the interpreter imports)
"""Run by `bench.exactness` in a subprocess: play burst plans in real time against one
limit, with this library or the published zae-limiter (same import name, own venv).

    python exactness_run.py URL API RESERVE < plans.json

API is "ours" or "published"; RESERVE is 1 or 0 (ours only). stdin holds
{"table": ..., "limit": [name, capacity, rate], "plans": {scenario: [offset_ms, ...]}};
stdout gets {scenario: [[ms the acquire was made, admitted], ...]}. Not imported by the
library: it targets two APIs.
"""

import json
import sys
import time
import uuid
import warnings

warnings.simplefilter("ignore")

from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository  # noqa: E402


def _repository(url, api, table, reserve):
    if api == "ours":
        return SyncRepository.open(name=table, endpoint_url=url, reserve=reserve)
    # The published library: its table alone (its stack template does not deploy locally).
    repo = SyncRepository(
        f"zael-pub-{uuid.uuid4().hex[:8]}",
        region="us-east-1",
        endpoint_url=url,
        _skip_deprecation_warning=True,
    )
    repo.create_table()
    return repo


def _warm_up(limiter, name, count=60):
    # A cold engine (DynamoDB Local's JIT) or connection would stretch the first burst out.
    roomy = Limit.per_second(name, 1_000_000)
    for _ in range(count):
        with limiter.acquire("warm-up", "api", {name: 1}, limits=[roomy]):
            pass


def _play(limiter, limit, offsets):
    entity = f"burst-{uuid.uuid4().hex[:8]}"
    start = time.monotonic()
    seen = []
    for offset in offsets:
        delay = start + offset / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        at_ms = time.time_ns() // 1_000_000
        try:
            with limiter.acquire(entity, "api", {limit.name: 1}, limits=[limit]):
                seen.append([at_ms, True])
        except RateLimitExceeded:
            seen.append([at_ms, False])
    return seen


def main(url, api, reserve):
    job = json.load(sys.stdin)
    name, capacity, rate = job["limit"]
    limit = Limit.per_second(name, rate, burst=capacity)
    repo = _repository(url, api, job["table"], reserve)
    limiter = SyncRateLimiter(repository=repo)
    _warm_up(limiter, name)
    out = {scenario: _play(limiter, limit, offsets) for scenario, offsets in job["plans"].items()}
    close = getattr(repo, "close", None)
    if close is not None:
        close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] == "1")
