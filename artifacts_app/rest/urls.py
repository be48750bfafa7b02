"""Routes under ``/<slug>/v1/`` (API.md "HTTP routes"); exact paths, no trailing slash.

``tool_urlpatterns`` is filled by the tool issue (``tools/tag_artifact``). The last pattern answers
every other path under ``/<slug>/v1/`` with the 404 envelope.
"""

from __future__ import annotations

from django.urls import include, path, re_path

from artifacts_app.rest import views
from artifacts_app.rest.errors import NotFoundView

SESSION_ID = r"(?P<session_id>[A-Za-z0-9][A-Za-z0-9._:-]{0,127})"
ARTIFACT_ID = r"(?P<artifact_id>[A-Za-z0-9_]{1,40})"

tool_urlpatterns: list = []

agent_urlpatterns = [
    path("sessions", views.SessionsView.as_view(), name="sessions"),
    re_path(rf"^sessions/{SESSION_ID}$", views.SessionDetailView.as_view(), name="session"),
    path("artifacts", views.ArtifactsView.as_view(), name="artifacts"),
    path("artifacts/kinds", views.KindsView.as_view(), name="kinds"),
    re_path(rf"^artifacts/{ARTIFACT_ID}$", views.ArtifactDetailView.as_view(), name="artifact"),
    re_path(rf"^artifacts/{ARTIFACT_ID}/content$", views.ContentView.as_view(), name="content"),
    path("", include(tool_urlpatterns)),
    re_path(r"^.*$", NotFoundView.as_view(), name="unknown_route"),
]

urlpatterns = [
    re_path(r"^(?P<slug>[^/]+)/v1/", include((agent_urlpatterns, "rest"), namespace="rest")),
]
