"""Websocket routes (API.md "Events"); the consumer lives in ``consumers``."""

from __future__ import annotations

from django.urls import re_path

from artifacts_app.consumers import EventsConsumer, EveryAgentConsumer
from artifacts_app.names import SESSION_ID_PATTERN, SLUG_PATTERN

SLUG = rf"(?P<slug>{SLUG_PATTERN})"
SESSION = rf"(?P<session_id>{SESSION_ID_PATTERN})"

websocket_urlpatterns: list = [
    # Staff: every agent at once (first: "ws" is a reserved slug, never an agent's).
    re_path(r"^ws/v1/events$", EveryAgentConsumer.as_asgi()),
    re_path(rf"^{SLUG}/v1/sessions/{SESSION}/events$", EventsConsumer.as_asgi()),
    re_path(rf"^{SLUG}/v1/events$", EventsConsumer.as_asgi()),
    re_path(r"", EventsConsumer.as_asgi()),  # anything else: accepted, then closed with 4404
]
