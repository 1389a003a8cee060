"""Simple: one resource, one limit, one acquire per task.

    locust -f examples/locust/simple.py --host my-table

Each user picks one of SIMPLE_ENTITIES entities at random and takes one request from its
`rps` limit (SIMPLE_RPS per second). Lower SIMPLE_RPS to see RATE_LIMITED in the stats.
"""

from __future__ import annotations

import os
import random

from locust import between, task

from zae_limiter import Limit
from zae_limiter.locust import RateLimiterUser

RESOURCE = "api"
ENTITIES = int(os.environ.get("SIMPLE_ENTITIES", "100"))
RPS = int(os.environ.get("SIMPLE_RPS", "100"))


class SimpleUser(RateLimiterUser):
    wait_time = between(0.01, 0.05)
    create_table = True

    def setup_limits(self) -> None:
        self.client.set_resource_defaults(RESOURCE, [Limit.per_second("rps", RPS)])

    @task
    def call_api(self) -> None:
        entity = f"user-{random.randrange(ENTITIES)}"
        with self.client.acquire(entity, RESOURCE, {"rps": 1}, name=RESOURCE):
            pass  # the protected call would run here
