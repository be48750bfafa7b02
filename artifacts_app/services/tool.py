"""Running a model's ``tag_artifact`` call: the one implementation behind REST, the Python API
and any other caller; its definition is ``artifacts_app.tool``."""

from __future__ import annotations

from artifacts_app import selectors, tool
from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSON
from artifacts_app.models import Agent, Artifact
from artifacts_app.registry import spec_for
from artifacts_app.services._write import TagResult
from artifacts_app.services.artifacts import artifact_tag


def tool_run(
    *,
    agent: Agent | str,
    input: JSON,  # the tool call's input, as the model sent it (dict or JSON text)
    session_id: str | None = None,
    turn_id: str | None = None,
) -> TagResult:
    """Run a model's ``tag_artifact`` call: tag with ``source="model"``.

    Refusals of the model's input raise ``tool.ToolInputError`` (400, naming the field, e.g.
    ``artifact.data.verdict``); ``tool.ToolResult.refused`` turns one into a tool result. ``data``
    is validated once, by the tag's rules; the refusal is reworded for the model.
    """
    agent = selectors.agent_get(agent)
    spec = spec_for(agent)
    tool.require_tool(spec)
    call = tool.parse_call(spec, input)
    try:
        return artifact_tag(
            agent=agent,
            kind=call.kind,
            key=call.key,
            title=call.title,
            data=call.data,
            session_id=session_id,
            turn_id=turn_id,
            source=Artifact.SOURCE_MODEL,
        )
    except ArtifactError as exc:
        raise tool.model_facing(exc) from None
