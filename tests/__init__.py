"""Test suite. A package so that `tests._servers` is importable from every tier's conftest."""
