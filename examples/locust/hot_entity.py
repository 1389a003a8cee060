"""Stress: one whale entity takes most of the traffic, the rest follows a power law.

    locust -f examples/locust/hot_entity.py --host my-table --headless -u 200 -r 50 -t 2m

WHALE_SHARE of the acquires go to one entity; the others pick among STRESS_ENTITIES
with a Zipf-like skew. The whale's bucket shard doubles when its partition runs hot
(STRESS_PARTITION_WCU, 1000 like DynamoDB by default; lower it to see doubling on a
local engine). Watch `zae-limiter entity shards show whale --resource api` meanwhile.
"""

from __future__ import annotations

import os
import random

from locust import constant_throughput, task

from zae_limiter import Limit
from zae_limiter.locust import RateLimiterUser

RESOURCE = "api"
ENTITIES = int(os.environ.get("STRESS_ENTITIES", "2000"))
WHALE_SHARE = float(os.environ.get("WHALE_SHARE", "0.5"))
PER_USER_RPS = float(os.environ.get("STRESS_USER_RPS", "10"))


class HotEntityUser(RateLimiterUser):
    wait_time = constant_throughput(PER_USER_RPS)
    create_table = True
    partition_wcu = int(os.environ.get("STRESS_PARTITION_WCU", "1000"))

    def setup_limits(self) -> None:
        self.client.set_resource_defaults(RESOURCE, [Limit.per_second("rps", 100)])
        self.client.set_limits("whale", [Limit.per_second("rps", 100_000)], resource=RESOURCE)

    def pick(self) -> str:
        if random.random() < WHALE_SHARE:
            return "whale"
        rank = min(ENTITIES - 1, int(random.paretovariate(1.2)) - 1)
        return f"tenant-{rank}"

    @task
    def acquire(self) -> None:
        entity = self.pick()
        name = "whale" if entity == "whale" else "others"
        with self.client.acquire(entity, RESOURCE, {"rps": 1}, name=name):
            pass
