"""Adapters: what other libraries do not offer publicly, one module per library."""
