"""agent-artifacts: durable outputs of AI agents.

``from artifacts_app import artifacts`` is the in-process Python API (see ``artifacts_app.api``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from artifacts_app.errors import ArtifactError

if TYPE_CHECKING:
    from artifacts_app.api import Artifacts

__all__ = ["ArtifactError", "artifacts"]


def artifacts(
    agent: str, *, session_id: str | None = None, turn_id: str | None = None
) -> Artifacts:
    """The Python API of one agent; with ``session_id``/``turn_id`` it is bound to them."""
    from artifacts_app.api import Artifacts  # imported late: models need the app registry

    return Artifacts(agent, session_id=session_id, turn_id=turn_id)


def __getattr__(name: str) -> Any:
    if name == "ArtifactRecord":
        from artifacts_app.api import ArtifactRecord

        return ArtifactRecord
    raise AttributeError(name)
