"""Fixtures for the engine's unit tests: an engine with the library's table."""

from __future__ import annotations

from typing import Any

import pytest

from zae_limiter import table as table_def
from zae_limiter.sim.engine import Engine, EngineClient

TABLE = "t"


class Tick:
    """An injected clock (ms)."""

    def __init__(self) -> None:
        self.now_ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def tick() -> Tick:
    return Tick()


@pytest.fixture
def engine(tick: Tick) -> Engine:
    made = Engine(clock=tick)
    made.call("create_table", table_def.create_table_params(TABLE))
    return made


@pytest.fixture
def client(engine: Engine) -> Any:
    return EngineClient(engine)
