"""Reading a model's ``tag_artifact`` call, and answering it as a tool result the model can act on.

``parse_call`` checks the shape the tool's schema promises and refuses with ``ToolInputError``: its
message names the field (``artifact.data.verdict``) and what was expected, so a model can correct
its call. ``services.tool_run`` does the tagging, whose rules validate ``data`` against the kind's
schema (once); ``model_facing`` words their refusals for the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from artifacts_app import tag_input
from artifacts_app.errors import ArtifactError, SchemaInvalidError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.records import ArtifactRecord
from artifacts_app.registry import AgentSpec, Kind
from artifacts_app.tool.schema import strip_defaulted_nulls
from artifacts_app.values import json_loads

# The model's ``artifact`` takes the tag's fields ``tag_input`` offers the model; ``kind`` and
# ``data`` are the kind's (never null), the others null for none.
ARTIFACT_FIELDS = tuple(field.name for field in tag_input.MODEL_FIELDS)
_BY_KIND = ("kind", "data")
SHAPE = (
    '{"artifact": {'
    + ", ".join(
        f'"{field.name}": ...'
        + (" or null" if field.nullable and field.name not in _BY_KIND else "")
        for field in tag_input.MODEL_FIELDS
    )
    + "}}"
)
_LISTED = ", ".join(ARTIFACT_FIELDS[:-1]) + " and " + ARTIFACT_FIELDS[-1]


class ToolInputError(ArtifactError):
    """Input the model got wrong: 400 with a message written for the model (``details.field``)."""

    def __init__(
        self,
        message: str,
        field: str,
        details: JSONObject | None = None,
        code: str = "tool_input_invalid",
        status: int = 400,
    ) -> None:
        super().__init__(code, message, {"field": field, **(details or {})})
        self.status = status


@dataclass(frozen=True)
class ToolCall:
    kind: str
    key: JSON
    title: JSON
    data: JSON


def _loads(raw: str | bytes) -> JSON:
    # The one parser (values.json_loads), as for every JSON body: NaN, Infinity, lone surrogates
    # and runaway nesting are refused here as in REST, never handed to the standard library.
    try:
        return json_loads(raw, what="The tool input", field="input")
    except ArtifactError as exc:
        raise ToolInputError(
            f"{exc.message.rstrip('.')}; send {SHAPE}.", "input", code=exc.code
        ) from None


def parse_call(spec: AgentSpec, tool_input: JSON) -> ToolCall:
    """The kind, key, title and parsed data of a model's call; refusals name the field."""
    if isinstance(tool_input, (str, bytes)):
        tool_input = _loads(tool_input)
    if not isinstance(tool_input, dict):
        raise ToolInputError(f"The tool input must be an object: {SHAPE}.", "input")
    extra = sorted(set(tool_input) - {"artifact"})
    if extra:
        raise ToolInputError(
            f"`{extra[0]}` is not a field of the tool input; it takes only `artifact`: {SHAPE}.",
            "input",
            {"unknown": extra},
        )
    artifact = tool_input.get("artifact")
    if not isinstance(artifact, dict):
        raise ToolInputError(f"`artifact` is required and must be an object: {SHAPE}.", "artifact")
    extra = sorted(set(artifact) - set(ARTIFACT_FIELDS))
    if extra:
        raise ToolInputError(
            f"`artifact.{extra[0]}` is not a field; the fields are {_LISTED}.",
            f"artifact.{extra[0]}",
        )
    allowed = sorted(spec.kinds)
    kind = artifact.get("kind")
    if not isinstance(kind, str) or kind not in spec.kinds:
        got = "missing" if kind is None else f"{kind!r}"
        raise ToolInputError(
            f"`artifact.kind` is {got}; expected one of: {', '.join(allowed)}.",
            "artifact.kind",
            {"expected": allowed},
        )
    data = artifact.get("data")
    declared = spec.kinds[kind]
    if data is None:
        raise ToolInputError(
            f"`artifact.data` is required for kind {kind!r} and may not be null; "
            f"expected {_expected(declared)}.",
            "artifact.data",
        )
    if declared.schema is not None:
        # Models send null for optional fields that have defaults; the schema wants them absent.
        data = strip_defaulted_nulls(declared.json_schema(), data)
    # A model often says "none" with an empty string; the tag's rules want null for that.
    key = None if artifact.get("key") == "" else artifact.get("key")
    title = None if artifact.get("title") == "" else artifact.get("title")
    return ToolCall(kind=kind, key=key, title=title, data=data)


def _expected(kind: Kind) -> str:
    schema = kind.json_schema()
    if schema is None:
        return "any JSON value, such as a string"
    props = schema.get("properties")
    if isinstance(props, dict):
        return "an object with " + ", ".join(f"`{name}`" for name in props)
    return f"a value of JSON type {schema.get('type', 'as the schema says')}"


def _data_error(exc: SchemaInvalidError) -> ToolInputError:
    kind = exc.kind
    if isinstance(exc.validation, ValidationError):
        errors = json.loads(exc.validation.json(include_url=False, include_context=False))
    else:  # a JSON Schema kind: the details are already in pydantic's shape
        errors = list(exc.details or [])
    first = errors[0] if errors else {"loc": [], "msg": str(exc)}
    field = ".".join(["artifact", "data", *(str(p) for p in first.get("loc", []))])
    more = f" ({len(errors) - 1} more problem(s) listed in details)" if len(errors) > 1 else ""
    got = first.get("input")
    shown = json.dumps(got)[:80] if got is not None and first.get("type") != "missing" else None
    message = f"`{field}`: {first.get('msg')}" + (f", got {shown}" if shown else "") + f"{more}."
    return ToolInputError(
        f"{message} Fix it to match kind {kind!r} and call tag_artifact again.",
        field,
        {"expected": first.get("msg"), "errors": errors},
        code="schema_invalid",
    )


def model_facing(exc: ArtifactError) -> ArtifactError:
    """A refusal from the tag service about one of the model's fields, renamed to the tool's path."""
    if isinstance(exc, SchemaInvalidError):
        return _data_error(exc)
    details = exc.details if isinstance(exc.details, dict) else {}
    field = details.get("field")
    if field not in ARTIFACT_FIELDS:
        return exc  # not the model's doing (an unknown session, a revoked agent…): host's problem
    path = f"artifact.{field}"
    message = exc.message.replace(f"`{field}`", f"`{path}`")
    if f"`{path}`" not in message:
        message = f"`{path}`: {message}"
    return ToolInputError(
        f"{message} Fix `{path}` and call tag_artifact again.",
        path,
        {k: v for k, v in details.items() if k != "field"},
        code=exc.code,
        status=exc.status,
    )


@dataclass(frozen=True)
class ToolResult:
    """What to hand back to the model after running its call: the record, or a refusal to fix.

    ``anthropic(tool_use_id)``, ``openai(tool_call_id)`` and ``openai_responses(call_id)`` give the
    provider's tool-result message.
    """

    ok: bool
    content: str
    record: ArtifactRecord | None = None
    created: bool = False
    code: str | None = None
    details: JSON = None

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
    def refused(cls, code: str, message: str, details: JSON = None) -> ToolResult:
        return cls(ok=False, content=f"Not tagged: {message}", code=code, details=details)

    @property
    def is_error(self) -> bool:
        return not self.ok

    def anthropic(self, tool_use_id: str) -> JSONObject:
        block: JSONObject = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": self.content,
        }
        if not self.ok:
            block["is_error"] = True
        return block

    def openai(self, tool_call_id: str) -> JSONObject:
        return {"role": "tool", "tool_call_id": tool_call_id, "content": self.content}

    def openai_responses(self, call_id: str) -> JSONObject:
        return {"type": "function_call_output", "call_id": call_id, "output": self.content}


def is_model_error(status: int, details: JSON) -> bool:
    """Whether a refusal of a tool call is the model's to fix (it names a field of the input)."""
    field = details.get("field") if isinstance(details, dict) else None
    return (
        status in (400, 413)
        and isinstance(field, str)
        and (field in ("input", "artifact") or field.startswith("artifact."))
    )
