"""Named engines that outlive the command that started them (`zae-limiter local up`).

Each instance has a state file `<state dir>/<name>.json` (PID, port, engine, endpoint,
log) and a log `<state dir>/<name>.log`. The state dir is `~/.zae-limiter/local`, or
`$ZAEL_LOCAL_STATE_DIR`. `down` stops exactly the recorded PID, and only after checking
that it still runs our engine.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zae_limiter.local import process
from zae_limiter.local.engine import LocalEngine, export_lines, local_env
from zae_limiter.local.engines import MOTO, check_engine
from zae_limiter.local.errors import InstanceNotRunningError, LocalEngineError

STATE_DIR_ENV = "ZAEL_LOCAL_STATE_DIR"
DEFAULT_INSTANCE = "default"
_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class InstanceState:
    """What `up` records about a running engine."""

    instance: str
    engine: str
    pid: int
    port: int
    endpoint_url: str
    marker: str
    log: str
    started_at: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class InstanceStatus:
    """`running` means: PID alive, still our engine, and the endpoint answers."""

    instance: str
    running: bool
    detail: str
    state: InstanceState | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "instance": self.instance,
            "running": self.running,
            "detail": self.detail,
        }
        if self.state is not None:
            body.update(
                engine=self.state.engine,
                pid=self.state.pid,
                port=self.state.port,
                endpoint_url=self.state.endpoint_url,
                log=self.state.log,
            )
        return body


def state_dir() -> Path:
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".zae-limiter" / "local"


def check_instance(name: str) -> str:
    # The name becomes a file name: keep it to one safe path component.
    if not _INSTANCE_NAME.match(name):
        raise LocalEngineError(
            f"invalid instance name {name!r}: use letters, digits, '.', '_' or '-'"
        )
    return name


def _state_path(instance: str) -> Path:
    return state_dir() / f"{check_instance(instance)}.json"


def _log_path(instance: str) -> Path:
    return state_dir() / f"{check_instance(instance)}.log"


def read_state(instance: str = DEFAULT_INSTANCE) -> InstanceState | None:
    """The recorded state, or None when there is none or it cannot be parsed."""
    path = _state_path(instance)
    try:
        raw = json.loads(path.read_text())
        return InstanceState(**raw)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        return None  # a corrupt file is as good as none: `up` overwrites it


def _write_state(state: InstanceState) -> None:
    path = _state_path(state.instance)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a reader never sees half a file.
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state.to_dict(), indent=2) + "\n")
    os.replace(tmp, path)


def _forget(instance: str) -> None:
    _state_path(instance).unlink(missing_ok=True)


def status(instance: str = DEFAULT_INSTANCE) -> InstanceStatus:
    state = read_state(instance)
    if state is None:
        return InstanceStatus(instance, False, "no state file")
    if not process.pid_alive(state.pid):
        return InstanceStatus(instance, False, f"pid {state.pid} is not running", state)
    if not process.runs_engine(state.pid, state.marker, state.port):
        return InstanceStatus(
            instance, False, f"pid {state.pid} is not a {state.engine} engine", state
        )
    if not process.probe(state.endpoint_url):
        return InstanceStatus(
            instance, False, f"pid {state.pid} runs but {state.endpoint_url} does not answer",
            state,
        )
    return InstanceStatus(instance, True, f"answering on {state.endpoint_url}", state)


@dataclass(frozen=True, slots=True)
class UpResult:
    state: InstanceState
    already_running: bool


def up(
    engine: str = MOTO, port: int | None = None, instance: str = DEFAULT_INSTANCE
) -> UpResult:
    """Start `engine` in the background under `instance`; idempotent when it already runs."""
    check_engine(engine)
    current = status(check_instance(instance))
    if current.running and current.state is not None:
        _check_compatible(current.state, engine, port)
        return UpResult(current.state, already_running=True)
    if current.state is not None:
        # Ours but not answering (hung, or half started): replace it rather than orphan it.
        process.stop_pid(current.state.pid, current.state.marker, current.state.port, grace=1.0)
    log = _log_path(instance)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")  # a fresh log per start, so an error's log is about this start
    started = LocalEngine.start(engine, port, log_path=log)
    started.detach()
    state = InstanceState(
        instance=instance,
        engine=engine,
        pid=started.pid,
        port=started.port,
        endpoint_url=started.endpoint_url,
        marker=started.marker,
        log=str(log),
        started_at=time.time(),
    )
    _write_state(state)
    return UpResult(state, already_running=False)


def _check_compatible(state: InstanceState, engine: str, port: int | None) -> None:
    if state.engine != engine or (port is not None and port != state.port):
        raise LocalEngineError(
            f"local engine {state.instance!r} already runs {state.engine} on port "
            f"{state.port}; run `zae-limiter local down --instance {state.instance}` first"
        )


@dataclass(frozen=True, slots=True)
class DownResult:
    instance: str
    stopped: bool
    detail: str
    state: InstanceState | None


def down(instance: str = DEFAULT_INSTANCE, grace: float = process.STOP_GRACE_SECONDS) -> DownResult:
    """Stop the recorded engine and forget it. A stale record is forgotten, never killed."""
    state = read_state(instance)
    if state is None:
        _forget(instance)
        return DownResult(instance, False, "not running (no state file)", None)
    stopped = process.stop_pid(state.pid, state.marker, state.port, grace=grace)
    _forget(instance)
    if stopped:
        return DownResult(instance, True, f"stopped {state.engine} (pid {state.pid})", state)
    return DownResult(
        instance, False,
        f"not running (pid {state.pid} is gone or not a {state.engine} engine); "
        "removed the stale state file",
        state,
    )


def _running_state(instance: str) -> InstanceState:
    current = status(instance)
    if not current.running or current.state is None:
        raise InstanceNotRunningError(instance)
    return current.state


def env(instance: str = DEFAULT_INSTANCE) -> dict[str, str]:
    """The environment for the running instance; raises when it is not running."""
    return local_env(_running_state(instance).endpoint_url)


def env_lines(instance: str = DEFAULT_INSTANCE) -> list[str]:
    """`export` lines for the running instance; raises when it is not running."""
    return export_lines(_running_state(instance).endpoint_url)
