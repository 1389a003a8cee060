"""Max throughput: back-to-back acquires with no wait, on limits that never bind.

    locust -f examples/locust/max_throughput.py --host my-table --headless -u 50 -r 10 -t 1m

The requests per second Locust reports is the ceiling of this client machine and
endpoint: every acquire is a speculative success (one write). Spread over
MAX_ENTITIES entities so no partition is hot; run several worker processes
(`--processes -1`) to use every core.
"""

from __future__ import annotations

import os
import random

from locust import task

from zae_limiter import Limit
from zae_limiter.locust import RateLimiterUser

RESOURCE = "api"
ENTITIES = int(os.environ.get("MAX_ENTITIES", "1000"))


class MaxThroughputUser(RateLimiterUser):
    create_table = True

    def wait_time(self) -> float:  # no think time at all
        return 0.0

    def setup_limits(self) -> None:
        self.client.set_resource_defaults(RESOURCE, [Limit.per_second("rps", 1_000_000)])

    @task
    def acquire(self) -> None:
        entity = f"tenant-{random.randrange(ENTITIES)}"
        with self.client.acquire(entity, RESOURCE, {"rps": 1}, name="acquire"):
            pass
