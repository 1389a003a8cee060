"""`zae-limiter namespace delete` as a process against a moto server: interrupted with
Ctrl-C (SIGINT) part way, then run again to the end; another namespace is untouched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests._terminal import ctrl_c_as_in_a_terminal
from zae_limiter import Limit, SyncRateLimiter, SyncRepository

RPM = Limit.per_minute("rpm", 100)


def cli(endpoint: str, table: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "ZAEL_NAME": table, "COLUMNS": "200"}
    script = Path(sys.executable).parent / "zae-limiter"
    return subprocess.Popen(
        [str(script), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )  # fmt: skip



def fill(endpoint: str, table: str, namespace: str, entities: int) -> SyncRateLimiter:
    repo = SyncRepository.open(namespace, name=table, endpoint_url=endpoint, create_table=True)
    limiter = SyncRateLimiter(repo)
    for i in range(entities):
        limiter.create_entity(f"e{i}")
        limiter.set_limits(f"e{i}", [RPM])
        with limiter.acquire(f"e{i}", "gpt-4", {"rpm": 1}):
            pass
    return limiter


def test_interrupted_delete_resumes_and_leaves_the_other_namespace(moto_http: str) -> None:
    table = f"nsdel-{uuid.uuid4().hex[:8]}"
    doomed = fill(moto_http, table, "doomed", entities=20)  # 100 items
    kept = fill(moto_http, table, "kept", entities=2)
    total = doomed.namespace_info("doomed").total
    kept_before = kept.namespace_info()
    assert total == 100

    # Slow enough (about 10 s at 25 WCU/s) to be interrupted part way.
    first = cli(moto_http, table, "namespace", "delete", "doomed", "--yes",
                "--wcu-per-second", "25")  # fmt: skip
    try:
        while doomed.namespace_info("doomed").total == total:
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGINT)
    _out, err = first.communicate(timeout=60)
    assert first.returncode == 130 and "interrupted" in err, err  # as shells report SIGINT
    left = doomed.namespace_info("doomed").total
    assert 0 < left < total

    second = cli(moto_http, table, "namespace", "delete", "doomed", "--yes", "-o", "json")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f'"deleted_items": {left}' in out
    assert doomed.namespace_info("doomed").total == 0
    assert kept.namespace_info() == kept_before
    for limiter in (doomed, kept):
        limiter.repository.close()
