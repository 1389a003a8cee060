"""examples/locust/gateway.py drives the gateway over HTTP (Locust in a subprocess: it
monkey-patches the standard library with gevent when imported)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.web.conftest import REPO, Gateway

pytestmark = pytest.mark.slow


def test_locustfile_counts_429_apart_and_fails_nothing(gateway: Gateway, tmp_path: Path) -> None:
    gateway.cli("limits", "set", "-r", "locust-model", "-l", "rpm:1/hour", "-l", "tpm:10000/hour")
    prefix = tmp_path / "run"
    command = [
        sys.executable, "-m", "locust", "-f", str(REPO / "examples" / "locust" / "gateway.py"),
        "--headless", "-u", "3", "-r", "3", "-t", "6s", "--only-summary",
        "--csv", str(prefix), "--host", gateway.url, "--stop-timeout", "2",
    ]  # fmt: skip
    env = {**os.environ, "GATEWAY_MODEL": "locust-model", "GATEWAY_KEYS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(f"{prefix}_stats.csv", newline="") as handle:
        rows = {row["Name"]: row for row in csv.DictReader(handle) if row["Type"] == "POST"}
    admitted = sum(int(r["Request Count"]) for n, r in rows.items() if not n.endswith("429"))
    limited = sum(int(r["Request Count"]) for n, r in rows.items() if n.endswith("429"))
    shown = {n: (r["Request Count"], r["Failure Count"]) for n, r in rows.items()}
    assert admitted == 1, shown  # one key, rpm 1 per hour
    assert limited >= 2, shown  # each of the other users was refused at least once
    assert sum(int(r["Failure Count"]) for r in rows.values()) == 0, done.stdout[-3000:]
