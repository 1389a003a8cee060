"""A deterministic fault simulator for zae-limiter (see DESIGN.md, section 12)."""
