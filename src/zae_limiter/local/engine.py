"""`LocalEngine`: one running engine process, usable as a context manager.

    with LocalEngine.start(engine="moto") as eng:
        client = boto3.client("dynamodb", endpoint_url=eng.endpoint_url, ...)

The CLI's `local up` starts the same way and then records the process in a state file
(see `instances.py`) instead of stopping it on exit.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from zae_limiter.local import process
from zae_limiter.local.engines import HOST, MOTO, launch_spec
from zae_limiter.local.errors import EngineStartError, LocalEngineError

_DETACHED: list[subprocess.Popen[bytes]] = []


def local_env(endpoint_url: str, region: str = process.LOCAL_REGION) -> dict[str, str]:
    """Environment that points boto3 / aiobotocore / the CLI at a local endpoint.

    AWS_ACCOUNT_ID_ENDPOINT_MODE=disabled: with botocore >= 1.44 the SDK otherwise tries
    account-based endpoint routing, which a local endpoint cannot serve. `region` names
    one region of a local global table (`local env --region`).
    """
    access_key, secret_key = process.LOCAL_CREDENTIALS
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }


def export_lines(endpoint_url: str) -> list[str]:
    """`export NAME=value` lines for `eval "$(zae-limiter local env)"`."""
    return [f"export {name}={value}" for name, value in local_env(endpoint_url).items()]


class LocalEngine:
    """A DynamoDB-compatible engine process listening on 127.0.0.1:`port`."""

    def __init__(
        self,
        engine: str,
        port: int,
        pid: int,
        log_path: Path,
        marker: str,
        *,
        owns_log: bool = False,
        child: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.engine = engine
        self.port = port
        self.pid = pid
        self.log_path = log_path
        self.marker = marker
        self._owns_log = owns_log
        self._child = child

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def env(self) -> dict[str, str]:
        return local_env(self.endpoint_url)

    @classmethod
    def start(
        cls,
        engine: str = MOTO,
        port: int | None = None,
        *,
        log_path: Path | None = None,
        timeout: float | None = None,
    ) -> LocalEngine:
        """Start `engine` on `port` (a free one if None) and return once it answers.

        Raises EngineNotInstalledError when Java / the jar / moto is missing, and
        EngineStartError when the process exits or stays silent past `timeout`.
        """
        if port is not None and process.port_in_use(port):
            raise LocalEngineError(
                f"port {port} on {HOST} is already in use; pick another --port or omit it"
            )
        chosen = process.free_port() if port is None else port
        spec = launch_spec(engine, chosen)
        owns_log = log_path is None
        log = _temp_log(engine) if log_path is None else log_path
        child = process.spawn(spec.argv, log, spec.cwd)
        started = cls(
            engine, chosen, child.pid, log, spec.marker, owns_log=owns_log, child=child
        )
        started._wait_ready(child.poll, spec.startup_timeout if timeout is None else timeout)
        return started

    def _wait_ready(self, exit_code: Callable[[], int | None], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = exit_code()
            if code is not None:
                raise EngineStartError(
                    f"{self.engine} exited with code {code} before answering on port "
                    f"{self.port}: {process.log_tail(self.log_path) or 'no output'} "
                    f"(log: {self.log_path})"
                )
            if process.probe(self.endpoint_url, timeout=1.0):
                return
            time.sleep(0.1)
        self._kill_quietly()
        raise EngineStartError(
            f"{self.engine} did not answer on {self.endpoint_url} within {timeout:.0f}s "
            f"(log: {self.log_path})"
        )

    def _kill_quietly(self) -> None:
        process.stop_pid(self.pid, self.marker, self.port, grace=1.0)

    def running(self) -> bool:
        """True while the process is alive and is still our engine."""
        return process.runs_engine(self.pid, self.marker, self.port)

    def answering(self, timeout: float = 2.0) -> bool:
        return process.probe(self.endpoint_url, timeout=timeout)

    def stop(self, grace: float = process.STOP_GRACE_SECONDS) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; a no-op when already stopped."""
        process.stop_pid(self.pid, self.marker, self.port, grace=grace)
        if self._child is not None:
            # Collect the exit status so no zombie is left behind (stop_pid may have
            # reaped it already, which Popen.wait tolerates).
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(timeout=5.0)
        if self._owns_log:
            self.log_path.unlink(missing_ok=True)

    def detach(self) -> None:
        """Let the engine outlive this object (`local up`); only `stop_pid` ends it now."""
        if self._child is not None:
            # Kept referenced so Popen.__del__ does not warn that the child still runs.
            _DETACHED.append(self._child)
            self._child = None

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalEngine(engine={self.engine!r}, pid={self.pid}, url={self.endpoint_url!r})"


def _temp_log(engine: str) -> Path:
    handle, name = tempfile.mkstemp(prefix=f"zae-limiter-{engine}-", suffix=".log")
    os.close(handle)
    return Path(name)
