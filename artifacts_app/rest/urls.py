"""Routes under ``/<slug>/v1/`` (API.md "HTTP routes"); exact paths, no trailing slash.

``tool_urlpatterns`` is filled by the tool issue (``tools/tag_artifact``). The last pattern answers
every other path under ``/<slug>/v1/`` with the 404 envelope.
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path, re_path

from artifacts_app.names import ARTIFACT_ID_PATTERN, RESERVED_SLUGS, SESSION_ID_PATTERN
from artifacts_app.rest import kinds, uploads, versions, views, webhooks
from artifacts_app.rest.errors import NotFoundView
from artifacts_app.rest.tools import ToolView

SESSION_ID = rf"(?P<session_id>{SESSION_ID_PATTERN})"
ARTIFACT_ID = rf"(?P<artifact_id>{ARTIFACT_ID_PATTERN})"
VERSION = r"(?P<number>[0-9]{1,10})"
WEBHOOK_ID = r"(?P<webhook_id>wh_[0-9a-zA-Z_-]{1,40})"
UPLOAD_ID = r"(?P<upload_id>[A-Za-z0-9_-]{1,40})"

tool_urlpatterns: list[URLPattern | URLResolver] = [
    path("tools/tag_artifact", ToolView.as_view(), name="tool-tag-artifact"),
]

agent_urlpatterns: list[URLPattern | URLResolver] = [
    path("sessions", views.SessionsView.as_view(), name="sessions"),
    re_path(rf"^sessions/{SESSION_ID}$", views.SessionDetailView.as_view(), name="session"),
    path("artifacts", views.ArtifactsView.as_view(), name="artifacts"),
    path("artifacts/kinds", kinds.KindsView.as_view(), name="kinds"),
    re_path(rf"^artifacts/{ARTIFACT_ID}$", views.ArtifactDetailView.as_view(), name="artifact"),
    re_path(rf"^artifacts/{ARTIFACT_ID}/content$", views.ContentView.as_view(), name="content"),
    re_path(rf"^artifacts/{ARTIFACT_ID}/pin$", versions.PinView.as_view(), name="pin"),
    re_path(
        rf"^artifacts/{ARTIFACT_ID}/versions$", versions.VersionsView.as_view(), name="versions"
    ),
    re_path(
        rf"^artifacts/{ARTIFACT_ID}/versions/{VERSION}$",
        versions.VersionDetailView.as_view(),
        name="version",
    ),
    re_path(
        rf"^artifacts/{ARTIFACT_ID}/versions/{VERSION}/content$",
        versions.VersionContentView.as_view(),
        name="version-content",
    ),
    re_path(
        rf"^artifacts/{ARTIFACT_ID}/versions/{VERSION}/diff$",
        versions.VersionDiffView.as_view(),
        name="version-diff",
    ),
    re_path(
        rf"^artifacts/{ARTIFACT_ID}/versions/{VERSION}/restore$",
        versions.VersionRestoreView.as_view(),
        name="version-restore",
    ),
    path("webhooks", webhooks.WebhooksView.as_view(), name="webhooks"),
    re_path(rf"^webhooks/{WEBHOOK_ID}$", webhooks.WebhookDetailView.as_view(), name="webhook"),
    re_path(
        rf"^webhooks/{WEBHOOK_ID}/secret$",
        webhooks.WebhookSecretView.as_view(),
        name="webhook-secret",
    ),
    re_path(
        rf"^webhooks/{WEBHOOK_ID}/deliveries$",
        webhooks.WebhookDeliveriesView.as_view(),
        name="webhook-deliveries",
    ),
    re_path(
        rf"^webhooks/{WEBHOOK_ID}/replay$",
        webhooks.WebhookReplayView.as_view(),
        name="webhook-replay",
    ),
    path("uploads", uploads.UploadsView.as_view(), name="uploads"),
    re_path(rf"^uploads/{UPLOAD_ID}$", uploads.UploadView.as_view(), name="upload"),
    path("", include(tool_urlpatterns)),
    # [\s\S]: an id with %0A in it is still an unknown route, not Django's HTML 404.
    re_path(r"^[\s\S]*$", NotFoundView.as_view(), name="unknown_route"),
]

# Every other path under /<slug>/ (/reviewer/v2/…, /reviewer/x) answers the 404 envelope too,
# with DEBUG on or off; the site's own prefixes keep Django's pages.
_RESERVED = "|".join(sorted(RESERVED_SLUGS))

urlpatterns = [
    re_path(r"^(?P<slug>[^/]+)/v1/", include((agent_urlpatterns, "rest"), namespace="rest")),
    re_path(
        rf"^(?!(?:{_RESERVED})/)(?P<slug>[^/]+)/[\s\S]*$",
        NotFoundView.as_view(),
        name="unknown_agent_route",
    ),
]
