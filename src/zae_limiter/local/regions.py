"""A local global table: one engine per region and the replicator between them.

    up_regions("moto", ("us-east-1", "eu-west-1"), lag_ms=1000)
    partition("eu-west-1", True)      # nothing flows in or out of eu-west-1
    down_regions()

Each region's engine is an ordinary named instance (`<instance>.<region>`, see
`instances.py`), so it has its own port, PID, log and state file. The group adds
`<instance>.regions.json` (regions, replicator PID), the replicator's config, its control
file (`lag_ms`, `partitioned`: the replicator re-reads it on every pass) and the status
file it writes. Clients of a region talk to its engine with that region's name.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zae_limiter.local import instances, process
from zae_limiter.local.engine import local_env
from zae_limiter.local.errors import InstanceNotRunningError, LocalEngineError
from zae_limiter.local.replication import DEFAULT_LAG_MS, Control, read_control, write_json

REPLICATOR_MODULE = "zae_limiter.local.replication"


@dataclass(frozen=True, slots=True)
class GroupState:
    """What `up_regions` records about the engines and the replicator."""

    instance: str
    engine: str
    regions: tuple[str, ...]
    replicator_pid: int
    config: str
    control: str
    status: str
    log: str

    def to_dict(self) -> dict[str, Any]:
        body = asdict(self)
        body["regions"] = list(self.regions)
        return body


@dataclass(frozen=True, slots=True)
class GroupStatus:
    instance: str
    running: bool
    regions: dict[str, instances.InstanceStatus] = field(default_factory=dict)
    replicator_running: bool = False
    control: Control = field(default_factory=Control)
    #: What the replicator last wrote: backlog per link, tables replicated.
    replication: dict[str, Any] = field(default_factory=dict)
    state: GroupState | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "running": self.running,
            "regions": {r: s.to_dict() for r, s in self.regions.items()},
            "replicator": {
                "running": self.replicator_running,
                "pid": None if self.state is None else self.state.replicator_pid,
                "log": None if self.state is None else self.state.log,
            },
            "lag_ms": self.control.lag_ms,
            "partitioned": list(self.control.partitioned),
            "backlog": self.replication.get("backlog", {}),
            "tables": self.replication.get("tables", {}),
        }


def region_instance(instance: str, region: str) -> str:
    """The named instance that runs `region`'s engine."""
    return f"{instance}.{region}"


def _path(instance: str, suffix: str) -> Path:
    return instances.state_dir() / f"{instances.check_instance(instance)}.{suffix}"


def read_group(instance: str = instances.DEFAULT_INSTANCE) -> GroupState | None:
    try:
        raw = json.loads(_path(instance, "regions.json").read_text())
        raw["regions"] = tuple(raw["regions"])
        return GroupState(**raw)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _check_regions(regions: tuple[str, ...]) -> None:
    if len(regions) < 2:
        raise LocalEngineError("--regions needs two or more regions, e.g. us-east-1,eu-west-1")
    if len(set(regions)) != len(regions):
        raise LocalEngineError("--regions lists a region twice")
    for region in regions:
        # The region becomes part of an instance name (and a file name).
        instances.check_instance(region)


def up_regions(
    engine: str,
    regions: tuple[str, ...],
    instance: str = instances.DEFAULT_INSTANCE,
    lag_ms: int = DEFAULT_LAG_MS,
) -> GroupStatus:
    """Start an engine per region and the replicator; a running group is left as it is."""
    _check_regions(regions)
    if lag_ms < 0:
        raise LocalEngineError("--lag-ms must be 0 or more")
    current = group_status(instance)
    if current.state is not None:
        if current.running and current.state.regions == regions:
            return current
        raise LocalEngineError(
            f"local engines {instance!r} already run for {', '.join(current.state.regions)}; "
            f"run `zae-limiter local down --instance {instance}` first"
        )
    if instances.read_state(instance) is not None:
        raise LocalEngineError(
            f"a single-region engine {instance!r} is recorded; run "
            f"`zae-limiter local down --instance {instance}` first or pick another --instance"
        )
    started = []
    try:
        for region in regions:
            started.append(instances.up(engine, None, region_instance(instance, region)).state)
    except Exception:
        # No group file is written yet: stop what did start, or nothing would.
        for state in started:
            instances.down(state.instance, grace=1.0)
        raise
    endpoints = {r: s.endpoint_url for r, s in zip(regions, started, strict=True)}
    config, control, status = (
        _path(instance, "replication.json"),
        _path(instance, "replication-control.json"),
        _path(instance, "replication-status.json"),
    )
    write_json(control, Control(lag_ms, ()).to_dict())
    status.unlink(missing_ok=True)
    write_json(config, {"endpoints": endpoints, "control": str(control), "status": str(status)})
    log = _path(instance, "replicator.log")
    log.write_bytes(b"")
    child = process.spawn(
        (sys.executable, "-m", REPLICATOR_MODULE, "--config", str(config)), log, None
    )
    group = GroupState(
        instance, engine, regions, child.pid, str(config), str(control), str(status), str(log)
    )
    write_json(_path(instance, "regions.json"), group.to_dict())
    return group_status(instance)


def _replicator_running(state: GroupState) -> bool:
    # The config path is on the replicator's command line: a recycled PID never matches.
    return process.runs_engine(state.replicator_pid, REPLICATOR_MODULE, state.config)


def group_status(instance: str = instances.DEFAULT_INSTANCE) -> GroupStatus:
    state = read_group(instance)
    if state is None:
        return GroupStatus(instance, False)
    regions = {r: instances.status(region_instance(instance, r)) for r in state.regions}
    replicating = _replicator_running(state)
    replication: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):  # not written yet
        replication = json.loads(Path(state.status).read_text())
    running = replicating and all(s.running for s in regions.values())
    return GroupStatus(
        instance, running, regions, replicating, read_control(Path(state.control)),
        replication, state,
    )  # fmt: skip


def _running_group(instance: str) -> GroupState:
    state = read_group(instance)
    if state is None:
        raise LocalEngineError(
            f"no multi-region engines {instance!r} are running; start them with "
            f"`zae-limiter local up --regions a,b --instance {instance}`"
        )
    return state


def partition(region: str, on: bool, instance: str = instances.DEFAULT_INSTANCE) -> Control:
    """Cut `region` off (nothing flows in or out) or heal it; the new control."""
    state = _running_group(instance)
    if region not in state.regions:
        raise LocalEngineError(
            f"{region!r} is not one of the local regions ({', '.join(state.regions)})"
        )
    current = read_control(Path(state.control))
    cut = [r for r in current.partitioned if r != region] + ([region] if on else [])
    updated = Control(current.lag_ms, tuple(cut))
    write_json(Path(state.control), updated.to_dict())
    return updated


def set_lag(lag_ms: int, instance: str = instances.DEFAULT_INSTANCE) -> Control:
    if lag_ms < 0:
        raise LocalEngineError("--lag-ms must be 0 or more")
    state = _running_group(instance)
    current = read_control(Path(state.control))
    updated = Control(lag_ms, current.partitioned)
    write_json(Path(state.control), updated.to_dict())
    return updated


def region_env(region: str, instance: str = instances.DEFAULT_INSTANCE) -> dict[str, str]:
    """The environment for one region's engine: its endpoint, and the region's name."""
    state = _running_group(instance)
    if region not in state.regions:
        raise LocalEngineError(
            f"{region!r} is not one of the local regions ({', '.join(state.regions)})"
        )
    current = instances.status(region_instance(instance, region))
    if not current.running or current.state is None:
        raise InstanceNotRunningError(region_instance(instance, region))
    return local_env(current.state.endpoint_url, region)


def down_regions(
    instance: str = instances.DEFAULT_INSTANCE, grace: float = process.STOP_GRACE_SECONDS
) -> list[str]:
    """Stop the replicator, then every region's engine; what was done, line by line."""
    state = read_group(instance)
    if state is None:
        return []
    done = []
    if process.stop_pid(state.replicator_pid, REPLICATOR_MODULE, state.config, grace=grace):
        done.append(f"stopped the replicator (pid {state.replicator_pid})")
    for region in state.regions:
        result = instances.down(region_instance(instance, region), grace=grace)
        done.append(f"{region}: {result.detail}")
    for suffix in ("replication.json", "replication-control.json", "replication-status.json",
                   "regions.json"):  # fmt: skip
        _path(instance, suffix).unlink(missing_ok=True)
    return done


def wait_replicating(
    instance: str = instances.DEFAULT_INSTANCE, timeout: float = 30.0
) -> GroupStatus:
    """Wait until the replicator has written its first status (it has made a pass)."""
    deadline = time.monotonic() + timeout
    while True:
        current = group_status(instance)
        if current.replication:
            return current
        if current.state is not None and not current.replicator_running:
            tail = process.log_tail(Path(current.state.log))
            raise LocalEngineError(f"the replicator exited: {tail or 'no output'}")
        if time.monotonic() > deadline:
            raise LocalEngineError(f"the replicator made no pass within {timeout:.0f}s")
        time.sleep(0.05)
