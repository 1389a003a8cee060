"""Shapers of focused worlds (sim/focus.py), one module per family of risks."""
