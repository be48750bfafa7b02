"""The ``tag_artifact`` tool a model is handed, generated from an agent's kinds registry.

The input is ``{"artifact": <one of the kinds' branches>}``: both providers want an object at the
root, and the union over kinds sits inside it. Each branch fixes its ``kind`` and carries ``key``,
``title`` (nullable) and ``data`` (that kind's schema, made strict by ``schema.Strictifier``).
"""

from __future__ import annotations

import copy

from artifacts_app import tag_input
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.jsontypes import JSONObject
from artifacts_app.registry import TOOL_NAME, AgentSpec, Kind
from artifacts_app.tool.schema import Strictifier, data_schema

FORMATS = ("anthropic", "openai", "openai-responses")
DEFAULT_FORMAT = "anthropic"


def description(spec: AgentSpec) -> str:
    """What the model reads: when to call the tool, and every kind with its description."""
    kinds = "\n".join(f"- {name}: {kind.description}" for name, kind in sorted(spec.kinds.items()))
    return (
        "Tag a notable output of your work as an artifact, so that it is kept and shown to the user "
        "and to the agent's host. Call this once for each notable output (for example a review, a "
        "report, a finding) as soon as it exists; do not tag drafts or small talk. Put it under "
        "`artifact` and pick the kind that fits:\n"
        f"{kinds}\n"
        "`data` must match the chosen kind's schema. If the call is refused, the result names the "
        "field to fix and what was expected: fix it and call tag_artifact again."
    )


def _branch(name: str, kind: Kind, defs: JSONObject) -> JSONObject:
    # The fields are tag_input's for the model: ``kind`` and ``data`` are this kind's, any other
    # is text or null, worded for the model. Every one is required (strict mode wants them all).
    properties: JSONObject = {}
    for field in tag_input.MODEL_FIELDS:
        if field.name == "kind":
            properties["kind"] = {"type": "string", "enum": [name]}
        elif field.name == "data":
            properties["data"] = data_schema(name, kind.json_schema(), defs)
        else:
            json_type = field.schema["type"]
            properties[field.name] = {
                "type": [json_type, "null"] if field.nullable else json_type,
                "description": field.model_description,
            }
    return {
        "type": "object",
        "description": f"A {name!r} artifact: {kind.description}",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_cache: dict[tuple[str, str, int], tuple[JSONObject, list[str]]] = {}


def input_schema_and_open_objects(spec: AgentSpec) -> tuple[JSONObject, list[str]]:
    """The tool's input schema, and the paths of objects that could not be closed (dict fields)."""
    # Kinds declared over HTTP are named by their declaration's hash, code's by their module.
    cache_key = (spec.slug, spec.module or spec.declaration, id(spec.kinds))
    cached = _cache.get(cache_key)
    if cached is not None:
        return copy.deepcopy(cached[0]), list(cached[1])
    defs: JSONObject = {}
    branches = [_branch(name, kind, defs) for name, kind in sorted(spec.kinds.items())]
    artifact: JSONObject = branches[0] if len(branches) == 1 else {"anyOf": branches}
    schema: JSONObject = {
        "type": "object",
        "properties": {"artifact": artifact},
        "required": ["artifact"],
        "additionalProperties": False,
    }
    if defs:
        schema["$defs"] = defs
    strict = Strictifier()
    schema = strict.walk(schema)
    if len(_cache) >= 512:  # every PUT of kinds makes a new entry
        _cache.clear()
    _cache[cache_key] = (schema, strict.open_objects)
    return copy.deepcopy(schema), list(strict.open_objects)


def input_schema(spec: AgentSpec) -> JSONObject:
    return input_schema_and_open_objects(spec)[0]


def require_tool(spec: AgentSpec) -> None:
    """The built-in tool exists only when declared on, with kinds, and not shadowed."""
    if spec.tool_enabled:
        return
    if spec.authored_tool is not None:
        why = "its own tool named tag_artifact shadows the built-in one"
    elif not spec.agent_tool:
        why = "it does not declare agent_tool=True"
    else:
        why = "it declares no kinds"
    raise NotFoundError(
        "tool_not_offered", f"Agent {spec.slug!r} offers no built-in tag_artifact tool: {why}."
    )


def tool_definition(spec: AgentSpec, format: str | None = None) -> JSONObject:
    """The tool in a provider's shape: ``anthropic`` (default), ``openai`` (Chat Completions
    function tool, strict) or ``openai-responses`` (Responses API function tool, strict)."""
    require_tool(spec)
    fmt = DEFAULT_FORMAT if format is None else format
    if fmt not in FORMATS:
        raise ArtifactError(
            "unknown_format",
            f"Unknown tool format {fmt!r}; use one of {', '.join(FORMATS)}.",
            {"field": "format", "allowed": list(FORMATS)},
        )
    schema, open_objects = input_schema_and_open_objects(spec)
    text = description(spec)
    if fmt == "anthropic":
        return {"name": TOOL_NAME, "description": text, "input_schema": schema}
    # Strict mode refuses an object with open keys (a dict field); such a schema goes non-strict.
    strict = not open_objects
    if fmt == "openai":
        return {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": text,
                "parameters": schema,
                "strict": strict,
            },
        }
    return {
        "type": "function",
        "name": TOOL_NAME,
        "description": text,
        "parameters": schema,
        "strict": strict,
    }
