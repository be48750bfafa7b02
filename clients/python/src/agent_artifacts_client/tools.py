"""The model-facing side: ``ToolResult``, what to hand back to the model after its ``tag_artifact`` call.

``client.tool(format)`` fetches the tool definition the server generates from the agent's kinds;
``client.run_tool(input)`` sends the model's call to ``POST tools/tag_artifact`` and answers a
``ToolResult``: the tagged record, or — when the refusal names a field of the model's input — a
refusal the model can act on (``is_error`` set). Other refusals (a bad key, an unknown session)
are the host's problem and raise ``ClientError``.

The texts and shapes are those of the server's in-process ``ToolResult`` (a test of the server
suite holds the two to the same answers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent_artifacts_client.records import ArtifactRecord


@dataclass(frozen=True)
class ToolResult:
    """``anthropic(tool_use_id)``, ``openai(tool_call_id)`` and ``openai_responses(call_id)`` give
    the provider's tool-result message."""

    ok: bool
    content: str
    record: ArtifactRecord | None = None
    created: bool = False
    code: str | None = None
    details: Any = None

    @classmethod
    def tagged(cls, record: ArtifactRecord, created: bool) -> ToolResult:
        what = "created" if created else "replaced the artifact with this key"
        return cls(
            ok=True,
            content=f"Tagged {record.kind} artifact {record.id}, version {record.version} ({what}).",
            record=record,
            created=created,
        )

    @classmethod
    def refused(cls, code: str, message: str, details: Any = None) -> ToolResult:
        return cls(ok=False, content=f"Not tagged: {message}", code=code, details=details)

    @property
    def is_error(self) -> bool:
        return not self.ok

    def anthropic(self, tool_use_id: str) -> dict[str, Any]:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": self.content,
        }
        if not self.ok:
            block["is_error"] = True
        return block

    def openai(self, tool_call_id: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": tool_call_id, "content": self.content}

    def openai_responses(self, call_id: str) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": call_id, "output": self.content}


def is_model_error(status: int, details: Any) -> bool:
    """Whether a refusal of a tool call is the model's to fix (it names a field of the input)."""
    field = details.get("field") if isinstance(details, dict) else None
    return (
        status in (400, 413)
        and isinstance(field, str)
        and (field in ("input", "artifact") or field.startswith("artifact."))
    )


def tool_call_key(tool_input: Any) -> Any:
    """The ``key`` of a model's call (its JSON text or the parsed object), or None."""
    if isinstance(tool_input, str):
        try:
            tool_input = json.loads(tool_input)
        except ValueError:
            return None
    artifact = tool_input.get("artifact") if isinstance(tool_input, dict) else None
    return artifact.get("key") if isinstance(artifact, dict) else None
