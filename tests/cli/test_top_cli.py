"""`zae-limiter top` as a user runs it, on in-process moto: one sample, tables and JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zae_limiter import Limit

if TYPE_CHECKING:
    from tests.cli.conftest import Zae


def test_once_prints_one_json_sample(zae: Zae) -> None:
    done = zae("top", "--once", "--for", "0", "-o", "json")
    assert done.code == 0, done.stderr
    body = done.json()
    assert body["buckets"] == [] and body["stream_shards"] >= 1
    assert body["table"] == zae.table


def test_once_as_a_table_names_the_buckets_written_while_it_watched(zae: Zae) -> None:
    import threading

    limiter = zae.limiter()
    limiter.set_resource_defaults("gpt", [Limit.per_minute("rpm", 600)])
    stop = threading.Event()

    def work() -> None:
        while not stop.wait(0.05):
            with limiter.acquire("acme-prod", "gpt", {"rpm": 1}):
                pass

    worker = threading.Thread(target=work)
    worker.start()
    try:
        done = zae("top", "--once", "--for", "1.5", "--interval", "0.5", "--entity-prefix", "acme")
    finally:
        stop.set()
        worker.join()
    assert done.code == 0, done.stderr
    assert "acme-prod" in done.stdout and "rpm" in done.stdout and "…" not in done.stdout


def test_json_needs_once_and_bad_sort_is_a_usage_error(zae: Zae) -> None:
    done = zae("top", "-o", "json")
    assert done.code == 2 and "add --once" in done.stderr
    assert zae("top", "--sort", "name").code == 2
