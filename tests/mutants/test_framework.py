"""The mutant framework itself: it restores what it breaks and cannot be fooled."""

from __future__ import annotations

import types

import pytest

from tests.mutants import must_fail, mutant, mutant_wrapping


def _double(x: int) -> int:
    return 2 * x


class _Base:
    def value(self) -> int:
        return 1


class _Child(_Base):
    pass


def _guarantee(module: types.ModuleType) -> None:
    assert module.double(3) == 6


def test_a_mutant_is_caught_and_the_original_comes_back() -> None:
    module = types.ModuleType("m")
    module.double = _double  # type: ignore[attr-defined]
    with mutant(module, "double", lambda x: x) as original:
        assert original is _double
        failure = must_fail(_guarantee, module)
    assert isinstance(failure, AssertionError)
    assert module.double is _double  # type: ignore[attr-defined]
    _guarantee(module)


def test_a_surviving_mutant_fails_the_check() -> None:
    module = types.ModuleType("m")
    module.double = _double  # type: ignore[attr-defined]
    with mutant(module, "double", lambda x: x + x):  # equivalent: survives
        with pytest.raises(pytest.fail.Exception, match="mutant survived"):
            must_fail(_guarantee, module)


def test_a_crash_for_another_reason_is_not_a_kill() -> None:
    module = types.ModuleType("m")
    module.double = _double  # type: ignore[attr-defined]
    with mutant(module, "double", lambda: 0):  # wrong signature: TypeError, not a kill
        with pytest.raises(TypeError):
            must_fail(_guarantee, module)


def test_restored_even_when_the_block_raises_and_inherited_attributes_drop_back() -> None:
    with pytest.raises(RuntimeError):
        with mutant_wrapping(_Child, "value", lambda original: lambda self: 0):
            assert _Child().value() == 0
            raise RuntimeError
    assert "value" not in _Child.__dict__
    assert _Child().value() == 1
    with pytest.raises(AttributeError):
        with mutant(_Child, "no_such_thing", None):
            pass
