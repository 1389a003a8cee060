"""LLM gateway: 8 models, each with requests and tokens per minute, settled after the call.

    locust -f examples/locust/llm_gateway.py --host my-table

An acquire takes 1 request and an estimate of the tokens; when the "model" answers, the
lease is adjusted by what the call really used (Locust shows it as COMMIT). API keys
belong to projects with `cascade=True`, so the project's limits are charged too.
"""

from __future__ import annotations

import os
import random

from locust import between, task

from zae_limiter import Limit
from zae_limiter.locust import RateLimiterUser

MODELS = {
    "gpt-4o": (500, 300_000),
    "gpt-4o-mini": (2_000, 2_000_000),
    "o3": (100, 100_000),
    "claude-sonnet": (500, 400_000),
    "claude-haiku": (2_000, 2_000_000),
    "gemini-pro": (300, 300_000),
    "gemini-flash": (2_000, 1_000_000),
    "llama-70b": (1_000, 500_000),
}
PROJECTS = int(os.environ.get("LLM_PROJECTS", "4"))
KEYS_PER_PROJECT = int(os.environ.get("LLM_KEYS_PER_PROJECT", "5"))
ESTIMATE = 800


class LlmGatewayUser(RateLimiterUser):
    wait_time = between(0.05, 0.2)
    create_table = True

    def setup_limits(self) -> None:
        for model, (rpm, tpm) in MODELS.items():
            limits = [Limit.per_minute("rpm", rpm), Limit.per_minute("tpm", tpm)]
            self.client.set_resource_defaults(model, limits)
        for p in range(PROJECTS):
            self.client.create_entity(f"project-{p}")
            for k in range(KEYS_PER_PROJECT):
                self.client.create_entity(f"key-{p}-{k}", parent_id=f"project-{p}", cascade=True)

    @task
    def complete(self) -> None:
        model = random.choice(list(MODELS))
        key = f"key-{random.randrange(PROJECTS)}-{random.randrange(KEYS_PER_PROJECT)}"
        consume = {"rpm": 1, "tpm": ESTIMATE}
        with self.client.acquire(key, model, consume, name=model) as lease:
            used = int(random.lognormvariate(6.5, 0.6))  # what the call really used
            lease.adjust(tpm=used - ESTIMATE)

    @task(1)
    def check_budget(self) -> None:
        self.client.available(f"key-{random.randrange(PROJECTS)}-0", "gpt-4o", name="gpt-4o")
