"""Websocket routes (the consumers live in ``consumers``)."""

from __future__ import annotations

websocket_urlpatterns: list = []
