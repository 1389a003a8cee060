"""Maintainer tools that run from a checkout (not part of the wheel)."""
