"""The REST views under ``/<slug>/v1/`` (API.md "HTTP routes"), a module per route family:
``sessions``, ``artifacts`` (list, tag, one record), ``content``; ``base`` is what they share
(``kinds``, ``versions`` and ``tools`` beside this package build on it too).

Each view parses, asks ``access`` about the caller, calls one service or selector and formats.
Sync views: under daphne that is one thread hop for the whole request (DESIGN.md §11); content is
streamed from an async generator (``rest/content.py``).
"""

from __future__ import annotations

from artifacts_app.rest.views.artifacts import (
    TAG_FIELDS,
    ArtifactDetailView,
    ArtifactsAcrossView,
    ArtifactsView,
    tag_json,
)
from artifacts_app.rest.views.base import AgentView, json_response, object_body, request_agent
from artifacts_app.rest.views.content import ContentView
from artifacts_app.rest.views.sessions import SESSION_FIELDS, SessionDetailView, SessionsView

__all__ = [
    "SESSION_FIELDS",
    "TAG_FIELDS",
    "AgentView",
    "ArtifactDetailView",
    "ArtifactsAcrossView",
    "ArtifactsView",
    "ContentView",
    "SessionDetailView",
    "SessionsView",
    "json_response",
    "object_body",
    "request_agent",
    "tag_json",
]
