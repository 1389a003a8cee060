"""One bucket write: what to take (levels), planned from an image (plan, shares), run as a
state machine (take), remembered (memory), and changed after the fact (charge)."""
