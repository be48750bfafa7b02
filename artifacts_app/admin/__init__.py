"""The supervisors' UI: the Django admin over artifacts, agents, sessions, keys, users and webhooks.

Every change goes through ``services`` (no model writes here), every list is bounded (no COUNT per
page load, ``fastlist``), and everything a stored record says is shown escaped.
"""

from __future__ import annotations

from django.contrib import admin

from artifacts_app.admin.agents import AgentAdmin, ApiKeyAdmin
from artifacts_app.admin.artifacts import ArtifactAdmin
from artifacts_app.admin.display import EMPTY
from artifacts_app.admin.sessions import SessionAdmin
from artifacts_app.admin.users import ArtifactsUserAdmin
from artifacts_app.admin.webhooks import WebhookAdmin

admin.site.site_header = "agent-artifacts · supervisors"
admin.site.site_title = "agent-artifacts"
admin.site.index_title = "What the agents shipped"
admin.site.site_url = "/playground/"
admin.site.empty_value_display = EMPTY

__all__ = [
    "AgentAdmin",
    "ApiKeyAdmin",
    "ArtifactAdmin",
    "ArtifactsUserAdmin",
    "SessionAdmin",
    "WebhookAdmin",
]
