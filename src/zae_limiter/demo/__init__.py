"""`make demo`: the project's main job in one command, against an embedded local engine.

    python -m zae_limiter.demo [--seconds N] [--quiet]

Starts moto's DynamoDB server on loopback, creates the table `demo`, runs an LLM-gateway
workload (cascade, estimate-then-adjust, a rejected burst, a hot entity whose shards
double), shows the hot entity's shards and the aggregated usage, and stops the engine.
"""

from __future__ import annotations

from zae_limiter.demo.app import main

__all__ = ["main"]
