"""Processes and sockets: pick a port, start an engine detached, ask it, stop it by PID.

Stopping always goes through `stop_pid`, which first checks that the PID still runs our
engine (its command line carries the engine's marker and port), so a stale state file
whose PID has been recycled never gets an unrelated process killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from zae_limiter.local.engines import HOST

LOCAL_REGION = "us-east-1"
LOCAL_CREDENTIALS = ("testing", "testing")
STOP_GRACE_SECONDS = 5.0


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def spawn(argv: Sequence[str], log_path: Path, cwd: Path | None) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session with output to `log_path`.

    A new session keeps the engine alive after the CLI that started it exits, and keeps
    Ctrl-C in the user's terminal from reaching it.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )


def probe(endpoint_url: str, timeout: float = 2.0) -> bool:
    """True when a DynamoDB API answers `ListTables` at `endpoint_url`."""
    import boto3  # deferred: `zae-limiter --help` should not pay for importing boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    client = boto3.client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name=LOCAL_REGION,
        aws_access_key_id=LOCAL_CREDENTIALS[0],
        aws_secret_access_key=LOCAL_CREDENTIALS[1],
        config=Config(
            connect_timeout=timeout,
            read_timeout=timeout,
            retries={"total_max_attempts": 1},  # one try: the caller loops
            account_id_endpoint_mode="disabled",
        ),
    )
    try:
        client.list_tables(Limit=1)
    except (BotoCoreError, ClientError):
        return False
    return True


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as dead; our own dead children are reaped)."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it just is not ours to signal
    return _proc_state(pid) != "Z"


def _reap(pid: int) -> None:
    # When the engine is our own child (context manager, tests), collect its exit status
    # so it does not linger as a zombie that still answers to kill(pid, 0).
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The state letter follows the parenthesised command name, which may contain spaces.
    return stat.rpartition(")")[2].split()[0]


def cmdline(pid: int) -> list[str] | None:
    """The argv of `pid`, or None when it cannot be read (no such process)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return _ps_cmdline(pid)
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _ps_cmdline(pid: int) -> list[str] | None:
    # Systems without /proc (macOS): ps prints the command line, space separated.
    try:
        done = subprocess.run(
            ["ps", "-p", str(pid), "-o", "command="],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return text.split() if done.returncode == 0 and text else None


def runs_engine(pid: int, marker: str, port: int | str) -> bool:
    """True when `pid` is alive and its command line names our engine and port (or, for
    the replicator, its config file: any argument only that process has)."""
    if not pid_alive(pid):
        return False
    argv = cmdline(pid)
    if not argv:
        return False
    return any(marker in part for part in argv) and str(port) in argv


def stop_pid(
    pid: int, marker: str, port: int | str, grace: float = STOP_GRACE_SECONDS
) -> bool:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL. False if `pid` is not our engine.

    moto's server can ignore SIGTERM while it is busy, hence the SIGKILL.
    """
    if not runs_engine(pid, marker, port):
        return False
    _signal(pid, signal.SIGTERM)
    if _wait_dead(pid, grace):
        return True
    _signal(pid, signal.SIGKILL)
    _wait_dead(pid, 5.0)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_dead(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def log_tail(log_path: Path, lines: int = 1) -> str:
    """The last non-empty line(s) of a log, to put the engine's own complaint in our error."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])
