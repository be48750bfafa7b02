"""What the door (``mount``) resolved for one HTTP request, handed to the handlers in the scope."""

from __future__ import annotations

from dataclasses import dataclass

from artifacts_app import access
from artifacts_app.models import Agent

CALL = "artifacts_mcp_call"  # the ASGI scope key the handlers read (``ctx.request.scope``)


@dataclass(frozen=True)
class Call:
    """Who calls which agent, resolved once per HTTP request, and where the site answers."""

    agent: Agent
    caller: access.Caller
    base_url: str  # scheme://host, for links to the HTTP content routes
    session_id: str | None = None  # ?sessionId= binds tags of this connection to a session
    turn_id: str | None = None
