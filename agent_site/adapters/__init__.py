"""Adapters: what other libraries do not offer publicly, one module per library (each lists its names)."""
