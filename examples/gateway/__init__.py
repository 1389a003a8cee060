"""The reference LLM gateway (see README.md)."""
