"""`zae-limiter entity reset` and `entity top-up`: output, JSON, audit, and the errors a
user sees."""

from __future__ import annotations

import re
import shlex
import time
from typing import TYPE_CHECKING

from zae_limiter import Limit

if TYPE_CHECKING:
    from tests.cli.conftest import Zae

RPM = [Limit.per_minute("rpm", 100)]


def drained(zae: Zae, n: int) -> None:
    limiter = zae.limiter()
    with limiter.acquire("k1", "gpt-4", {"rpm": n}, limits=RPM):
        pass


def test_reset_fills_the_bucket_and_says_so(zae: Zae) -> None:
    drained(zae, 100)
    done = zae("entity", "reset", "k1", "-r", "gpt-4", "--reason", "incident 7", "--yes",
               "--principal", "alice")  # fmt: skip
    assert done.code == 0, done.stderr
    assert done.stdout == "reset k1 / gpt-4 to full (1 shard(s))\n"
    assert zae.limiter().available("k1", "gpt-4", limits=RPM) == {"rpm": 100}
    listed = zae("audit", "list", "--entity", "k1", "-o", "json")
    last = listed.json()["events"][-1]
    assert (last["action"], last["principal"]) == ("reset_bucket", "alice")
    assert last["after"]["reason"] == "incident 7"


def test_reset_asks_first(zae: Zae) -> None:
    drained(zae, 100)
    done = zae("entity", "reset", "k1", "-r", "gpt-4", input="n\n")
    assert done.code == 1
    assert zae.limiter().available("k1", "gpt-4", limits=RPM) == {"rpm": 0}


def _lacking(started: float) -> tuple[float, float]:
    """What a bucket drained by 30 at `started` (time.monotonic) can lack now: 30, less
    what refilled in the real time since (100 a minute), the CLI's start included."""
    refilled = (time.monotonic() - started) * 100 / 60
    return 30 - refilled - 0.001, 30.0


def test_top_up_json_reports_what_was_granted_and_refused(zae: Zae) -> None:
    started = time.monotonic()
    drained(zae, 30)
    done = zae("entity", "top-up", "k1", "-r", "gpt-4", "-a", "rpm=50", "-o", "json")
    low, high = _lacking(started)
    assert done.code == 0, done.stderr
    body = done.json()
    assert (body["entity_id"], body["resource"], body["shards"]) == ("k1", "gpt-4", 1)
    granted, refused = body["granted"]["rpm"], body["refused"]["rpm"]
    assert low <= granted <= high and granted + refused == 50


def test_top_up_text_names_what_did_not_fit(zae: Zae) -> None:
    started = time.monotonic()
    drained(zae, 30)
    done = zae("entity", "top-up", "k1", "-r", "gpt-4", "-a", "rpm=50")
    low, high = _lacking(started)
    assert done.code == 0, done.stderr
    found = re.fullmatch(
        r"topped up k1 / gpt-4: rpm \+([0-9.]+)\n"
        r"rpm: ([0-9.]+) did not fit \(a bucket holds no more than capacity\)\n",
        done.stdout,
    )
    assert found, done.stdout
    granted, refused = float(found[1]), float(found[2])
    assert low <= granted <= high and abs(granted + refused - 50) < 0.002


def test_mistakes_are_one_line_without_a_traceback(zae: Zae) -> None:
    done = zae("entity", "top-up", "k1", "-r", "gpt-4", "-a", "rpm")
    assert done.code == 2 and "LIMIT=N" in done.stderr
    done = zae("entity", "reset", "nobody", "-r", "gpt-4", "--yes")
    assert done.code == 2 and done.stderr == (
        "error: nobody has no bucket for gpt-4 (nothing acquired yet)\n"
    )
    assert "Traceback" not in done.stderr


def test_the_examples_of_controls_md_run(zae: Zae) -> None:
    from pathlib import Path

    from tests.cli.test_docs import doc_steps

    text = (Path(__file__).resolve().parents[2] / "docs" / "controls.md").read_text()
    lines = [line for kind, line, _ in doc_steps(text) if kind == "run"]
    assert any(" reset " in x for x in lines) and any(" top-up " in x for x in lines)
    limiter = zae.limiter()
    limiter.create_entity("acme")
    limiter.create_entity("key-1", parent_id="acme")
    limiter.create_entity("internal-batch")
    limiter.create_entity("beta-org")
    limits = [Limit.per_minute("rpm", 100), Limit.per_minute("tpm", 100_000)]
    with limiter.acquire("key-1", "gpt-4", {"rpm": 90, "tpm": 50_000}, limits=limits):
        pass
    for line in lines:
        done = zae(*shlex.split(line)[1:])
        assert done.code == 0, f"{line}\n{done.stderr}"


def test_set_parent_moves_the_entity_and_records_why(zae: Zae) -> None:
    limiter = zae.limiter()
    for org in ("org-a", "org-b"):
        limiter.create_entity(org)
    limiter.create_entity("k1", parent_id="org-a", cascade=True)
    done = zae("entity", "set-parent", "k1", "org-b", "--reason", "merger", "--principal", "bob")
    assert done.code == 0, done.stderr
    assert done.stdout == "moved k1 from org-a to org-b\n"
    last = zae("audit", "list", "--entity", "k1", "-o", "json").json()["events"][-1]
    assert (last["action"], last["principal"]) == ("set_parent", "bob")
    assert (last["after"]["parent_id"], last["after"]["reason"]) == ("org-b", "merger")
    again = zae("entity", "set-parent", "k1", "org-a", "-o", "json")
    assert again.json()["parent_id"] == "org-a"
    assert again.json()["previous_parent_id"] == "org-b"


def test_set_parent_errors_without_a_traceback(zae: Zae) -> None:
    zae.limiter().create_entity("org-a")
    zae.limiter().create_entity("k1", parent_id="org-a")
    for args, says in (
        (("nobody", "org-a"), "'nobody'"),
        (("k1", "nowhere"), "nowhere"),
        (("org-a", "k1"), "cycle"),
    ):
        done = zae("entity", "set-parent", *args)
        assert done.code != 0
        assert says in done.stderr and "Traceback" not in done.stderr, done.stderr
