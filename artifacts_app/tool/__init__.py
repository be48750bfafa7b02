"""The model-facing ``tag_artifact`` tool: its definition per provider, and running a model's call.

    from artifacts_app.tool import tool_definition, ToolResult
    tool = tool_definition(spec, "openai")          # hand it to the model
    result = artifacts("reviewer").run_tool(call)   # a ToolResult; .anthropic(id) / .openai(id)

``services.tool_run`` is the one implementation of running a call (it tags with ``source="model"``).
"""

from __future__ import annotations

from artifacts_app.tool.definition import (
    DEFAULT_FORMAT,
    FORMATS,
    description,
    input_schema,
    require_tool,
    tool_definition,
)
from artifacts_app.tool.run import (
    ToolCall,
    ToolInputError,
    ToolResult,
    is_model_error,
    model_facing,
    parse_call,
)

__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "ToolCall",
    "ToolInputError",
    "ToolResult",
    "description",
    "input_schema",
    "is_model_error",
    "model_facing",
    "parse_call",
    "require_tool",
    "tool_definition",
]
