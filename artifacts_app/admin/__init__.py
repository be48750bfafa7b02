"""The supervisors' UI: the Django admin over artifacts, agents, sessions, keys and users.

Every change goes through ``services`` (no model writes here), every list is bounded (no COUNT per
page load, ``fastlist``), and everything a stored record says is shown escaped.
"""

from artifacts_app.admin.agents import AgentAdmin, ApiKeyAdmin
from artifacts_app.admin.artifacts import ArtifactAdmin
from artifacts_app.admin.sessions import SessionAdmin
from artifacts_app.admin.users import ArtifactsUserAdmin

__all__ = ["AgentAdmin", "ApiKeyAdmin", "ArtifactAdmin", "ArtifactsUserAdmin", "SessionAdmin"]
