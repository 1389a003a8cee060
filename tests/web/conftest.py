"""The gateway under a real uvicorn server on loopback, against a moto server over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from tests._servers import unique_name
from tests.conftest import free_port
from zae_limiter import SyncRateLimiter, SyncRepository
from zae_limiter.cli import cli
from zae_limiter.local import local_env

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
#: Seconds between streamed tokens: long enough that a client can cut a stream midway.
TOKEN_DELAY = "0.05"


@dataclass
class Gateway:
    url: str
    table: str
    endpoint: str
    limiter: SyncRateLimiter

    def cli(self, *args: str) -> None:
        """`zae-limiter ...` on the gateway's table, as an operator runs it."""
        command = [*args, "--name", self.table, "--endpoint-url", self.endpoint]
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 0, result.output

    def api_key(self, model: str, *limits: str) -> str:
        """A new API key (an entity) with these limits (`NAME:RATE/...`) on `model`."""
        key = f"key-{uuid.uuid4().hex[:8]}"
        self.cli("entity", "create", key)
        self.cli("limits", "set", "-e", key, "-r", model, *[f"--limit={s}" for s in limits])
        return key

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the gateway exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)  # waiting for a server to listen, not for tokens
    pytest.fail(f"the gateway did not answer within {START_TIMEOUT_S}s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def gateway(moto_http: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    table = unique_name("gateway")
    port = free_port()
    env = {
        **os.environ,
        **local_env(moto_http),
        "ZAEL_NAME": table,
        "ZAEL_CREATE_TABLE": "1",
        "GATEWAY_TOKEN_DELAY": TOKEN_DELAY,
    }
    env.pop("ZAEL_NAMESPACE", None)
    log = tmp_path_factory.mktemp("gateway") / "uvicorn.log"
    command = [sys.executable, "-m", "uvicorn", "examples.gateway.app:app",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    repo: SyncRepository | None = None
    try:
        _wait_until_up(url, proc, log)
        repo = SyncRepository.open(name=table, endpoint_url=moto_http)
        yield Gateway(url, table, moto_http, SyncRateLimiter(repo))
    finally:
        if repo is not None:
            repo.close()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        print(f"gateway log:\n{log.read_text()}")  # shown when a test failed
