"""`LocalEngine`: real engine processes started, answered and stopped by PID."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests._servers import EngineEndpoint
from zae_limiter.local import EngineStartError, LocalEngine, LocalEngineError
from zae_limiter.local.process import pid_alive

pytestmark = pytest.mark.engine


def test_context_manager_starts_and_stops_moto() -> None:
    with LocalEngine.start(engine="moto") as eng:
        assert eng.endpoint_url == f"http://127.0.0.1:{eng.port}"
        assert eng.running()
        assert eng.answering()
        pid, log = eng.pid, eng.log_path
    assert not pid_alive(pid)
    assert not eng.running()
    assert not log.exists()  # a temporary log is removed with the engine


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored() -> None:
    eng = LocalEngine.start(engine="moto")
    # A stopped process leaves SIGTERM pending, like a busy server that ignores it.
    os.kill(eng.pid, signal.SIGSTOP)
    started = time.monotonic()
    eng.stop(grace=0.5)
    assert time.monotonic() - started >= 0.5
    assert not pid_alive(eng.pid)


def test_taken_port_is_refused_before_starting(moto_server: EngineEndpoint) -> None:
    port = int(moto_server.url.rsplit(":", 1)[1])
    with pytest.raises(LocalEngineError, match=f"port {port} .* already in use"):
        LocalEngine.start(engine="moto", port=port)


def test_dynamodb_local_starts_and_stops(dynamodb_local: EngineEndpoint) -> None:
    # The session fixture proves startup; this checks a second, private instance stops.
    with LocalEngine.start(engine="dynamodb-local") as eng:
        assert eng.answering()
        pid = eng.pid
    assert not pid_alive(pid)


def test_engine_that_never_answers_is_killed_and_reported() -> None:
    # No time to answer at all: start must kill what it spawned and say where the log is.
    with pytest.raises(EngineStartError, match=r"moto did not answer on .* within 0s \(log: "):
        LocalEngine.start(engine="moto", timeout=0.0)
