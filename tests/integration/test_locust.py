"""Locust runs headless against a moto server and reports what the limiter did.

Locust monkey-patches the standard library with gevent when imported, so it only ever
runs in a subprocess here (`locust -f examples/locust/... --headless --csv ...`).
"""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._servers import EngineEndpoint, start_moto, unique_name

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("locust") is None,
        reason="locust is not installed: pip install -e '.[dev]' (or '.[bench]')",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "locust"


@pytest.fixture(scope="module")
def moto() -> Iterator[EngineEndpoint]:
    endpoint, stop = start_moto()
    try:
        yield endpoint
    finally:
        stop()


def run_locust(
    endpoint: EngineEndpoint,
    locustfile: str,
    out: Path,
    env: dict[str, str] | None = None,
    seconds: int = 4,
) -> dict[tuple[str, str], dict[str, str]]:
    """Run a locustfile headless for a few seconds; its stats rows by (type, name)."""
    prefix = out / "run"
    command = [
        sys.executable, "-m", "locust", "-f", str(EXAMPLES / locustfile),
        "--headless", "-u", "5", "-r", "5", "-t", f"{seconds}s", "--only-summary",
        "--csv", str(prefix), "--host", unique_name("locust"), "--stop-timeout", "2",
    ]  # fmt: skip
    run_env = {**os.environ, **endpoint.env, **(env or {})}
    run_env.pop("AWS_SESSION_TOKEN", None)
    done = subprocess.run(
        command, env=run_env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with open(f"{prefix}_stats.csv", newline="") as handle:
        return {(row["Type"], row["Name"]): row for row in csv.DictReader(handle)}


def requests(stats: dict[tuple[str, str], dict[str, str]], kind: str) -> int:
    return sum(int(row["Request Count"]) for (t, _), row in stats.items() if t == kind)


def failures(stats: dict[tuple[str, str], dict[str, str]]) -> int:
    return sum(int(row["Failure Count"]) for key, row in stats.items() if key[0] != "")


def test_tight_limits_show_up_as_rate_limited_not_failures(
    moto: EngineEndpoint, tmp_path: Path
) -> None:
    stats = run_locust(moto, "simple.py", tmp_path, {"SIMPLE_RPS": "2", "SIMPLE_ENTITIES": "3"})
    assert requests(stats, "ACQUIRE") > 0
    assert requests(stats, "RATE_LIMITED") > 0
    assert requests(stats, "SET_RESOURCE_DEFAULTS") == 1  # setup ran once for all users
    assert failures(stats) == 0


def test_llm_gateway_adjusts_leases_and_reports_commits(
    moto: EngineEndpoint, tmp_path: Path
) -> None:
    # Setup writes 32 items before the first task: give a busy machine time for both.
    stats = run_locust(moto, "llm_gateway.py", tmp_path, seconds=8)
    assert requests(stats, "ACQUIRE") > 0, stats
    assert requests(stats, "COMMIT") > 0, stats
    assert requests(stats, "CREATE_ENTITY") == 4 + 4 * 5
    assert failures(stats) == 0


def test_the_module_says_how_to_install_locust_when_it_is_missing(tmp_path: Path) -> None:
    blocker = tmp_path / "locust.py"
    blocker.write_text("raise ImportError('No module named locust')\n")
    code = "import zae_limiter.locust"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "pip install 'zae-limiter[bench]'" in done.stderr


POOL_CHECK = """
from zae_limiter.locust import open_limiter, pool_size
import os
limiter = open_limiter("{table}", create_table=True, max_pool=pool_size(50))
config = limiter.repository._runner.client.meta.config
os.environ["BOTO3_MAX_POOL"] = "7"
print(config.max_pool_connections, pool_size(50), pool_size(None))
limiter.repository.close()
"""


def test_the_shared_client_pool_is_sized_for_the_users(moto: EngineEndpoint) -> None:
    env = {**os.environ, **moto.env}
    env.pop("BOTO3_MAX_POOL", None)
    code = POOL_CHECK.format(table=unique_name("pool"))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["110", "7", "7"]  # 2 per user + 10; BOTO3_MAX_POOL wins
