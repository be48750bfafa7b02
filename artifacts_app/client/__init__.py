"""Python clients of the service (what agents and the tests use)."""

from artifacts_app.client.events import StreamRefused, subscribe

__all__ = ["StreamRefused", "subscribe"]
