"""The reference gateway (examples/gateway) over HTTP: chat completions per API key.

    uvicorn examples.gateway.app:app --port 8765 &
    zae-limiter limits set -r gpt-4o -l rpm:60/min -l tpm:20000/min
    locust -f examples/locust/gateway.py --host http://127.0.0.1:8765

Unlike the other locustfiles this one never touches DynamoDB itself: it is a client of
the gateway, as the gateway's users are. A `429` is counted on its own (request name
`... 429`), not as a failure; a `401`, a `5xx` or a missing RateLimit header is a failure.
"""

from __future__ import annotations

import os
import random

from locust import HttpUser, between, task

MODEL = os.environ.get("GATEWAY_MODEL", "gpt-4o")
KEYS = int(os.environ.get("GATEWAY_KEYS", "20"))
STREAM_SHARE = float(os.environ.get("GATEWAY_STREAM_SHARE", "0.2"))
ROUTE = "/v1/chat/completions"


class GatewayUser(HttpUser):
    wait_time = between(0.05, 0.2)

    @task
    def complete(self) -> None:
        stream = random.random() < STREAM_SHARE
        name = f"{ROUTE} stream" if stream else ROUTE
        words = " ".join(["word"] * random.randint(1, 40))
        body = {
            "model": MODEL,
            "max_tokens": random.choice((64, 256, 1024)),
            "stream": stream,
            "messages": [{"role": "user", "content": words}],
        }
        headers = {"Authorization": f"Bearer locust-key-{random.randrange(KEYS)}"}
        with self.client.post(ROUTE, json=body, headers=headers, name=name,
                              catch_response=True, stream=stream) as answer:  # fmt: skip
            if answer.status_code == 429:
                answer.request_meta["name"] = f"{name} 429"
                answer.success()
            elif answer.status_code != 200:
                answer.failure(f"HTTP {answer.status_code}: {answer.text[:200]}")
            elif "RateLimit" not in answer.headers:
                answer.failure("no RateLimit header")
            elif stream and not answer.text.rstrip().endswith("data: [DONE]"):
                answer.failure("stream did not end with [DONE]")
