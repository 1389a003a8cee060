"""`zae-limiter top --once -o json`, the real executable, on a real endpoint's stream
while a workload of known rates runs: the hot entity first, its rate the admitted one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests._servers import EngineEndpoint, unique_name
from tests._terminal import ctrl_c_as_in_a_terminal
from zae_limiter import Limit, SyncRateLimiter, SyncRepository

EXECUTABLE = shutil.which("zae-limiter", path=str(Path(sys.executable).parent))
RATES = {"hot": 20.0, "warm": 5.0}  # acquires (of 1 rpm token) per second


class Workload(threading.Thread):
    """Acquires at a steady pace per entity until stopped; counts what was admitted."""

    def __init__(self, limiter: SyncRateLimiter) -> None:
        super().__init__(daemon=True)
        self.limiter = limiter
        self.stop = threading.Event()
        self.admitted: dict[str, list[float]] = {entity: [] for entity in RATES}

    def run(self) -> None:
        due = dict.fromkeys(RATES, time.time())
        while not self.stop.is_set():
            entity = min(due, key=due.__getitem__)
            pause = due[entity] - time.time()
            if pause > 0:
                time.sleep(pause)
            with self.limiter.acquire(entity, "gpt", {"rpm": 1}):
                pass
            self.admitted[entity].append(time.time())
            due[entity] += 1 / RATES[entity]

    def rate(self, entity: str, since_s: float, until_s: float) -> float:
        """Admitted per second in (since, until] by the wall clock top samples with."""
        count = sum(1 for at in self.admitted[entity] if since_s < at <= until_s)
        return count / (until_s - since_s)


def top(endpoint: EngineEndpoint, table: str, *args: str) -> subprocess.Popen[str]:
    assert EXECUTABLE is not None
    env = {**os.environ, **endpoint.env}
    env.pop("AWS_PROFILE", None)
    return subprocess.Popen(
        [EXECUTABLE, "top", "-n", table, "--endpoint-url", endpoint.url, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def test_top_once_shows_the_hot_entity_first_at_the_admitted_rate(
    engine_env: EngineEndpoint,
) -> None:
    table = unique_name("top")
    # No reserves: every acquire is one write, so tc grows exactly with what is admitted.
    repo = SyncRepository.open(name=table, create_table=True, reserve=False)
    limiter = SyncRateLimiter(repo)
    limiter.set_resource_defaults("gpt", [Limit.per_minute("rpm", 6000)])
    for entity in RATES:
        limiter.create_entity(entity)
    workload = Workload(limiter)
    workload.start()
    try:
        watcher = top(engine_env, table, "--once", "--for", "8", "--interval", "0.5", "-o", "json")
        out, err = watcher.communicate(timeout=120)
    finally:
        workload.stop.set()
        workload.join(timeout=30)
        repo.close()
    assert watcher.returncode == 0, err
    sample: dict[str, Any] = json.loads(out)
    buckets = sample["buckets"]
    assert [b["entity_id"] for b in buckets] == ["hot", "warm"]
    assert sample["stream_shards"] >= 1 and sample["observed_seconds"] >= 8
    until = sample["sampled_at_ms"] / 1000
    since = until - min(10.0, sample["observed_seconds"])
    for bucket in buckets:
        (rpm,) = bucket["limits"]
        admitted = workload.rate(bucket["entity_id"], since, until)
        assert abs(rpm["rate_10s"] - admitted) <= 0.1 * admitted, (rpm, admitted)
        assert rpm["refill_per_second"] == 100
        assert abs(rpm["pct_10s"] - admitted) <= 0.1 * admitted  # 100/s refill: % == rate
        assert 0 < rpm["tokens_left"] <= rpm["capacity"] == 6000


def test_top_says_clearly_when_the_table_has_no_stream(engine_env: EngineEndpoint) -> None:
    table = unique_name("nostream")
    engine_env.client().create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
    )  # fmt: skip
    done = top(engine_env, table, "--once", "--for", "0")
    _out, err = done.communicate(timeout=60)
    assert done.returncode == 1
    assert "has no stream" in err and "Traceback" not in err


def _in_a_terminal(endpoint: EngineEndpoint, table: str) -> tuple[int, subprocess.Popen[bytes]]:
    """`zae-limiter top` on a pseudo-terminal, as a user starts it; (pty fd, process)."""
    import pty

    assert EXECUTABLE is not None
    primary, secondary = pty.openpty()
    env = {**os.environ, **endpoint.env, "COLUMNS": "160", "LINES": "40", "TERM": "xterm"}
    process = subprocess.Popen(
        [EXECUTABLE, "top", "-n", table, "--endpoint-url", endpoint.url, "--interval", "0.3"],
        stdin=secondary, stdout=secondary, stderr=secondary, env=env,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )  # fmt: skip
    os.close(secondary)
    return primary, process


def _read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    import select

    seen = b""
    deadline = time.monotonic() + seconds
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the process left and closed its terminal
                break
            seen += chunk
    return seen


def _read_until_exit(fd: int, process: subprocess.Popen[bytes], seconds: float) -> bytes:
    """What the process writes until it exits (at most `seconds`); its exit code is then
    `process.returncode` (None: it did not leave)."""
    seen = b""
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        seen += _read_until(fd, b"\x00", 0.2)
    return seen


def test_q_and_ctrl_c_leave_the_live_view_cleanly(moto_server: EngineEndpoint) -> None:
    import signal

    table = unique_name("live")
    SyncRepository.open(name=table, create_table=True,
                        endpoint_url=moto_server.url).close()  # fmt: skip
    for leave in ("q", "ctrl-c"):
        fd, process = _in_a_terminal(moto_server, table)
        try:
            shown = _read_until(fd, b"zae-limiter top", 60)
            assert b"zae-limiter top" in shown, shown
            if leave == "q":
                os.write(fd, b"q")
            else:
                process.send_signal(signal.SIGINT)
            # Read on while it leaves, as a terminal does: restoring the terminal's mode
            # waits for the output to be read, and a loaded machine leaves some unread.
            after = _read_until_exit(fd, process, 20)
            assert process.returncode == 0, (leave, after)
            assert b"Traceback" not in after + _read_until(fd, b"\x00", 0.5)
        finally:
            if process.poll() is None:
                process.kill()
            os.close(fd)
