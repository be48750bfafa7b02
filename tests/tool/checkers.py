"""What Anthropic and OpenAI strict mode accept of a tool, as executable rules.

Sources: OpenAI's Structured Outputs guide ("Supported schemas": root object, not anyOf;
additionalProperties false on every object; every property required, optional ones nullable;
anyOf yes, oneOf/allOf/not no; the listed keywords only; at most 5000 properties and 10 levels of
nesting) and Anthropic's tool-use docs (name ^[a-zA-Z0-9_-]{1,64}$, input_schema a JSON Schema
object with type "object" and no union at its top).
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator

OPENAI_KEYWORDS = {
    # structure
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const",
    "$ref", "$defs", "description",
    # constraints strict mode documents as supported
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minItems", "maxItems",
}  # fmt: skip
OPENAI_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def check_draft_2020_12(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)


def _nodes(schema: Any, path: str = "#", depth: int = 0):
    """Every subschema with its path and object-nesting depth."""
    if not isinstance(schema, dict):
        return
    yield path, schema, depth
    inner = depth + (1 if schema.get("type") == "object" or "properties" in schema else 0)
    for name, prop in (schema.get("properties") or {}).items():
        yield from _nodes(prop, f"{path}/properties/{name}", inner)
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}/items", depth)
    for i, branch in enumerate(schema.get("anyOf") or []):
        yield from _nodes(branch, f"{path}/anyOf/{i}", depth)
    for name, sub in (schema.get("$defs") or {}).items():
        yield from _nodes(sub, f"{path}/$defs/{name}", 0)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}/additionalProperties", inner)


def openai_strict_problems(tool: dict[str, Any]) -> list[str]:
    """Why OpenAI would refuse this Chat Completions function tool in strict mode ([] = none)."""
    problems = []
    if tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
        return ["not a {type: function, function: {...}} tool"]
    fn = tool["function"]
    if fn.get("strict") is not True:
        problems.append("strict is not true")
    if not NAME_RE.match(fn.get("name", "")):
        problems.append("bad name")
    schema = fn.get("parameters")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return [*problems, "parameters root is not an object"]
    if "anyOf" in schema:
        problems.append("root is anyOf")
    total_props = 0
    for path, node, depth in _nodes(schema):
        unknown = set(node) - OPENAI_KEYWORDS
        if unknown:
            problems.append(f"{path}: keywords strict mode refuses: {sorted(unknown)}")
        if "oneOf" in node or "allOf" in node or "not" in node:
            problems.append(f"{path}: oneOf/allOf/not")
        if "$ref" in node and len(node) > 1:
            problems.append(f"{path}: $ref beside other keywords")
        if "format" in node and node["format"] not in OPENAI_FORMATS:
            problems.append(f"{path}: format {node['format']!r}")
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if "object" in kinds or "properties" in node:
            props = node.get("properties") or {}
            total_props += len(props)
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties is not false")
            if sorted(node.get("required") or []) != sorted(props):
                problems.append(f"{path}: not every property is required")
        if "type" not in node and "anyOf" not in node and "$ref" not in node:
            problems.append(f"{path}: no type")
        if "enum" in node and None in node["enum"] and "null" not in kinds:
            problems.append(f"{path}: enum has null but type does not")
        if depth > 10:
            problems.append(f"{path}: more than 10 levels of nesting")
        ref = node.get("$ref")
        if (
            ref is not None
            and ref != "#"
            and not (
                ref.startswith("#/$defs/") and ref.split("/")[-1] in (schema.get("$defs") or {})
            )
        ):
            problems.append(f"{path}: $ref {ref} does not resolve in the root's $defs")
    if total_props > 5000:
        problems.append("more than 5000 properties")
    return problems


def anthropic_problems(tool: dict[str, Any]) -> list[str]:
    """Why Anthropic would refuse this tool definition ([] = none)."""
    problems = []
    if set(tool) - {"name", "description", "input_schema", "cache_control"}:
        problems.append(
            f"unknown fields {sorted(set(tool) - {'name', 'description', 'input_schema'})}"
        )
    if not NAME_RE.match(tool.get("name", "")):
        problems.append("bad name")
    if not isinstance(tool.get("description"), str) or not tool["description"].strip():
        problems.append("no description")
    schema = tool.get("input_schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return [*problems, "input_schema is not type object"]
    for union in ("anyOf", "oneOf", "allOf"):
        if union in schema:
            problems.append(f"input_schema has {union} at its top")
    return problems


def sdk_problems(tool: dict[str, Any], fmt: str) -> list[str]:
    """Why the vendor's own SDK type for this format refuses the tool ([] = none): Anthropic's
    ``ToolParam``, OpenAI's Chat Completions function tool and Responses ``FunctionToolParam``,
    validated by pydantic, with no key the type does not name."""
    from typing import get_type_hints

    from pydantic import TypeAdapter, ValidationError

    if fmt == "anthropic":
        from anthropic.types import ToolParam as sdk_type
    elif fmt == "openai":
        from openai.types import chat

        sdk_type = (
            getattr(chat, "ChatCompletionFunctionToolParam", None) or chat.ChatCompletionToolParam
        )
    else:
        from openai.types.responses import FunctionToolParam as sdk_type
    problems = [
        f"key {key!r} unknown to the SDK" for key in set(tool) - set(get_type_hints(sdk_type))
    ]
    try:
        TypeAdapter(sdk_type).validate_python(tool, strict=True)
    except ValidationError as exc:
        problems.append(str(exc))
    return problems
