"""`zae-limiter doctor`'s verdicts, from facts alone (no AWS): schema, aggregator, alarms,
permissions, the clock (measured against a simulated server and clock), the exit code."""

from __future__ import annotations

from dataclasses import replace
from email.utils import formatdate

import pytest

from zae_limiter import Limit
from zae_limiter.clock_watch import ClockStats, ClockWatch
from zae_limiter.doctor import aggregator, clock, monitoring, permissions, schema_version
from zae_limiter.doctor.aggregator import AggregatorFacts
from zae_limiter.doctor.monitoring import AlarmFacts
from zae_limiter.doctor.report import DoctorReport, fail, ok, skip, warn
from zae_limiter.flows.records.version import VersionRecord
from zae_limiter.infra.options import ACQUIRE_ACTIONS

# ---------------------------------------------------------------- schema


def test_schema_at_this_clients_version_is_ok() -> None:
    assert schema_version.judge("t", VersionRecord(3, "0.2.0"), "0.2.0", 3).status == "ok"


def test_a_table_newer_than_the_client_says_upgrade() -> None:
    found = schema_version.judge("t", VersionRecord(4, "0.3.0"), "0.2.0", 3)
    assert found.status == "fail"
    assert found.fix is not None and "upgrade zae-limiter" in found.fix


def test_a_table_requiring_a_newer_client_says_upgrade_to_that_release() -> None:
    found = schema_version.judge("t", VersionRecord(3, "0.9.0"), "0.2.0", 3)
    assert found.status == "fail"
    assert found.fix is not None and "0.9.0" in found.fix


def test_a_table_too_old_to_read_says_migrate() -> None:
    found = schema_version.judge("t", VersionRecord(1), "0.2.0", 3)
    assert found.status == "fail"
    assert found.fix == "run `zae-limiter migrate --name t`"


def test_an_old_but_readable_table_or_an_interrupted_migration_warns() -> None:
    older = schema_version.judge("t", VersionRecord(2), "0.2.0", 3)
    moving = schema_version.judge("t", VersionRecord(2, migrating_to=3), "0.2.0", 3)
    missing = schema_version.judge("t", None, "0.2.0", 3)
    assert (older.status, moving.status, missing.status) == ("warn", "warn", "warn")
    assert moving.fix is not None and "resume" in moving.fix
    assert missing.fix is not None and "zae-limiter migrate" in missing.fix


# ---------------------------------------------------------------- aggregator

HEALTHY = AggregatorFacts(
    stack_status="UPDATE_COMPLETE", function="t-aggregator", function_state="Active",
    mapping="uuid-1", mapping_state="Enabled", errors=0, invocations=12,
)  # fmt: skip


def _replace(changes: dict[str, object]) -> AggregatorFacts:
    return replace(HEALTHY, **changes)  # type: ignore[arg-type]


def test_a_healthy_aggregator_is_ok() -> None:
    assert aggregator.judge("t", HEALTHY).status == "ok"


@pytest.mark.parametrize(
    ("changes", "status", "in_fix"),
    [
        ({"stack_status": None}, "warn", "zae-limiter aggregator run"),
        ({"stack_status": "UPDATE_ROLLBACK_FAILED"}, "fail", "zae-limiter deploy"),
        ({"function": None}, "warn", "--aggregator"),
        ({"function_error": "ResourceNotFoundException: gone"}, "fail", "zae-limiter deploy"),
        ({"mapping": None}, "fail", "re-creates"),
        ({"mapping_state": "Disabled"}, "fail", "update-event-source-mapping --uuid uuid-1"),
        ({"errors": 3}, "warn", "aws logs tail /aws/lambda/t-aggregator"),
        ({"metrics_error": "AccessDenied"}, "warn", "cloudwatch:GetMetricStatistics"),
    ],
)
def test_each_aggregator_fault_names_its_fix(
    changes: dict[str, object], status: str, in_fix: str
) -> None:
    found = aggregator.judge("t", _replace(changes))
    assert found.status == status
    assert found.fix is not None and in_fix in found.fix


# ---------------------------------------------------------------- alarms

DECLARED = ("t-readthrottlealarm", "t-writethrottlealarm")


def test_alarms_present_and_quiet_are_ok_missing_fail_firing_warn() -> None:
    quiet = AlarmFacts(DECLARED, dict.fromkeys(DECLARED, "OK"))
    assert monitoring.judge_alarms("t", quiet).status == "ok"
    gone = monitoring.judge_alarms("t", AlarmFacts(DECLARED, {DECLARED[0]: "OK"}))
    assert gone.status == "fail" and DECLARED[1] in gone.summary
    loud = AlarmFacts(DECLARED, {**quiet.found, DECLARED[0]: "ALARM"})
    firing = monitoring.judge_alarms("t", loud)
    assert firing.status == "warn" and DECLARED[0] in firing.summary
    assert monitoring.judge_alarms("t", AlarmFacts()).status == "warn"


# ---------------------------------------------------------------- permissions


def test_the_simulator_is_asked_about_the_role_behind_an_assumed_role_session() -> None:
    session = "arn:aws:sts::123456789012:assumed-role/app-role/i-0abc"
    assert permissions.principal_arn(session) == "arn:aws:iam::123456789012:role/app-role"
    assert permissions.principal_arn("arn:aws:iam::123456789012:user/ci") == (
        "arn:aws:iam::123456789012:user/ci"
    )
    assert permissions.principal_arn("arn:aws:iam::123456789012:root") is None


def test_a_denied_action_fails_and_names_the_policy_to_attach() -> None:
    found = dict.fromkeys(ACQUIRE_ACTIONS, "allowed") | {"dynamodb:UpdateItem": "implicitDeny"}
    verdict = permissions.judge("t", "default", "IAM policy simulation", found, "")
    assert verdict.status == "fail"
    assert "dynamodb:UpdateItem" in verdict.summary
    assert verdict.fix is not None and "AcquirePolicy" in verdict.fix
    assert "dynamodb:Query" in verdict.details["not_checked"]


def test_all_allowed_is_ok_and_an_unexpected_answer_warns() -> None:
    allowed = dict.fromkeys(ACQUIRE_ACTIONS, "allowed")
    assert permissions.judge("t", "default", "dry probe", allowed, "").status == "ok"
    odd = allowed | {"dynamodb:PutItem": "error: ValidationException: nope"}
    assert permissions.judge("t", "default", "dry probe", odd, "").status == "warn"


# ---------------------------------------------------------------- clock


class SimulatedServer:
    """A server whose clock is `offset_ms` behind ours, answering `rtt_ms` after a request
    (the answer formed half-way), on a simulated local clock that sleeps advance."""

    def __init__(self, offset_ms: int, rtt_ms: int, start_ms: int = 1_700_000_000_337) -> None:
        self.now = start_ms
        self.offset = offset_ms
        self.rtt = rtt_ms
        self.watch = ClockWatch(warn_after_ms=None)
        self.asked = 0

    def clock(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * 1000)

    def ask(self) -> None:
        self.asked += 1
        sent = self.now
        server_ms = sent + self.rtt // 2 - self.offset
        self.now += self.rtt
        date = formatdate(server_ms // 1000, usegmt=True)
        self.watch.heard(sent, self.now, {"ResponseMetadata": {"HTTPHeaders": {"date": date}}})


@pytest.mark.parametrize(("offset", "rtt"), [(0, 2), (2000, 4), (-2000, 4), (-350, 40), (73, 9)])
def test_measure_bounds_the_offset_to_round_trips_with_few_requests(
    offset: int, rtt: int
) -> None:
    server = SimulatedServer(offset, rtt)
    stats = clock.measure(server.ask, server.watch.stats, server.clock, server.sleep)
    assert stats.low_ms is not None and stats.high_ms is not None
    assert stats.low_ms <= offset <= stats.high_ms
    assert stats.high_ms - stats.low_ms <= 2 * rtt + 1
    assert stats.dates > clock.TICKS
    assert server.asked < 40 + clock.LEAD_MS // rtt * clock.TICKS


def test_the_clock_verdict_and_its_cost_in_tokens() -> None:
    fast = clock.Fastest(Limit.per_second("rps", 500), "entity=* resource=*")
    on_time = clock.judge(ClockStats(answers=9, low_ms=-3, high_ms=2, dates=3), fast, False)
    assert on_time.status == "ok" and on_time.details["tokens_at_risk"] == 2
    off = clock.judge(ClockStats(answers=9, low_ms=1998, high_ms=2003, dates=3), fast, False)
    assert off.status == "fail" and "ahead of" in off.summary
    assert off.fix is not None and "NTP" in off.fix
    assert off.details["tokens_at_risk"] == 500  # d x rate, capped at the capacity
    slow = clock.Fastest(Limit.per_minute("rpm", 6000), "entity=a resource=b")
    assert slow.cost(2003) == 201
    assert clock.judge(ClockStats(answers=3, low_ms=-400, high_ms=-300), None, False).status == (
        "warn"
    )
    assert clock.judge(ClockStats(), None, False).status == "skip"


# ---------------------------------------------------------------- the report


def test_the_exit_code_is_1_on_any_failure_2_on_warnings_only_0_otherwise() -> None:
    def report(*checks: object) -> DoctorReport:
        return DoctorReport("t", "default", "us-east-1", None, False, checks)  # type: ignore[arg-type]

    assert report(ok("a", "fine"), skip("b", "n/a")).exit_code == 0
    assert report(ok("a", "fine"), warn("b", "hm", "do x")).exit_code == 2
    assert report(warn("b", "hm", "do x"), fail("c", "bad", "do y")).exit_code == 1
    assert report(fail("c", "bad", "do y")).as_dict()["counts"]["fail"] == 1
