"""Websocket routes (API.md "Events"); the consumer lives in ``consumers``."""

from __future__ import annotations

from django.urls import re_path

from artifacts_app.consumers import EventsConsumer

SLUG = r"(?P<slug>[a-z0-9][a-z0-9-]{0,62})"
SESSION = r"(?P<session_id>[A-Za-z0-9][A-Za-z0-9._:-]{0,127})"

websocket_urlpatterns: list = [
    re_path(rf"^{SLUG}/v1/sessions/{SESSION}/events$", EventsConsumer.as_asgi()),
    re_path(rf"^{SLUG}/v1/events$", EventsConsumer.as_asgi()),
    re_path(r"", EventsConsumer.as_asgi()),  # anything else: accepted, then closed with 4404
]
