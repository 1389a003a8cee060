"""The focused worlds' shapers, one module per family of risks (sim/focus.py)."""
