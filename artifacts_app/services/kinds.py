"""Kinds declared over HTTP (API.md "Kinds declared over HTTP"): the one implementation of
replacing an agent's declaration, for agents whose host code is not Python.

The declaration is checked whole before anything is written (a refusal changes nothing); then, in
one transaction on the agent's locked row, it is stored with its hash and the agent's ``max`` and
``keepVersions``, and a ``max`` lowered below what the agent holds evicts the surplus there and then
(``artifacts_evict``, the tag's own eviction, with its events).
"""

from __future__ import annotations

from django.db import transaction

from artifacts_app import jsonschemas, selectors
from artifacts_app.errors import ArtifactError, ConflictError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.models import Agent
from artifacts_app.names import KIND_RE
from artifacts_app.registry import (
    DEFAULT_KEEP_VERSIONS,
    DEFAULT_MAX,
    declaration_hash,
    declared_in_code,
)
from artifacts_app.services.artifacts import artifacts_evict
from artifacts_app.tool.strict import strict_problem
from artifacts_app.values import check_value

FIELDS = ("kinds", "agentTool", "max", "keepVersions")
KIND_FIELDS = ("description", "schema", "keepVersions")
COLUMN_MAX = 2**31 - 1  # what the agent row's counters hold on every database


def kinds_declare(*, agent: Agent | str, declaration: JSON) -> Agent:
    """Replace ``agent``'s kinds with ``declaration`` (the body of ``PUT artifacts/kinds``, camelCase
    as on the wire); answers the agent row as stored. Refused with 409 ``kinds_in_code`` for an
    agent declared in Python, with 400 and a sentence for anything else wrong."""
    agent = selectors.agent_get(agent)
    module = declared_in_code(agent)
    if module:
        raise ConflictError(
            "kinds_in_code",
            f"Agent {agent.slug!r} declares its kinds in code ({module}); change them there. "
            "Only agents without a Python module declare kinds over HTTP.",
            {"module": module},
        )
    stored, cap, keep = declaration_clean(declaration)
    with transaction.atomic():
        Agent.objects.filter(pk=agent.pk).update(
            kinds=stored,
            kinds_hash=declaration_hash(stored),
            max_artifacts=cap,
            keep_versions=keep,
        )
        artifacts_evict(agent=agent, max=cap)
    return selectors.agent_get(agent.slug)


def _refuse(code: str, message: str, field: str, **details: JSON) -> ArtifactError:
    return ArtifactError(code, message, {"field": field, **details})


def _unknown_fields(body: JSONObject, allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise _refuse(
            "unknown_field",
            f"Unknown field {where}{unknown[0]!r}; the fields are {', '.join(allowed)}.",
            f"{where}{unknown[0]}",
            fields=unknown,
        )


def _whole(value: JSON, *, field: str, default: int, code: str, what: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= COLUMN_MAX:
        raise _refuse(code, f"`{field}` is {what}; got {value!r}.", field)
    return value


def declaration_clean(body: JSON) -> tuple[JSONObject, int, int]:
    """The declaration to store (``{"kinds": {name: {"description", "schema", "keepVersions"}},
    "agentTool"}``), ``max`` and ``keepVersions``; every rule of the section checked here."""
    if not isinstance(body, dict):
        raise ArtifactError(
            "invalid_body",
            'The body must be a JSON object: {"kinds": {name: {"description", "schema"?, '
            '"keepVersions"?}}, "agentTool"?, "max"?, "keepVersions"?}.',
        )
    _unknown_fields(body, FIELDS, "")
    for name, value in body.items():  # what both databases can store
        check_value(value, field=name, code="invalid_body")
    kinds = body.get("kinds")
    if not isinstance(kinds, dict):
        raise _refuse(
            "invalid_kinds",
            "`kinds` is required: an object of kind name -> {description, schema?, keepVersions?} "
            "({} for a freeform agent).",
            "kinds",
        )
    agent_tool = body.get("agentTool", False)
    if not isinstance(agent_tool, bool):
        raise _refuse("invalid_agent_tool", "`agentTool` is true or false.", "agentTool")
    if agent_tool and not kinds:
        raise _refuse(
            "tool_needs_kinds",
            "`agentTool` is true but no kinds are declared: the tag_artifact tool needs at least one.",
            "agentTool",
        )
    cap = _whole(
        body.get("max"),
        field="max",
        default=DEFAULT_MAX,
        code="invalid_max",
        what="a whole number of at least 1",
    )
    keep = _whole(
        body.get("keepVersions"),
        field="keepVersions",
        default=DEFAULT_KEEP_VERSIONS,
        code="invalid_keep_versions",
        what="a whole number of at least 1 (1 keeps no history)",
    )
    cleaned = {name: _kind_clean(name, kind, agent_tool=agent_tool) for name, kind in kinds.items()}
    return {"kinds": cleaned, "agentTool": agent_tool}, cap, keep


def _kind_clean(name: str, kind: JSON, *, agent_tool: bool) -> JSONObject:
    field = f"kinds.{name}"
    if not KIND_RE.fullmatch(name):
        raise _refuse(
            "invalid_kind",
            f"Kind name {name!r} is not valid: use 1–64 of A-Z a-z 0-9 . _ : - starting with a "
            "letter or digit.",
            field,
        )
    if not isinstance(kind, dict):
        raise _refuse(
            "invalid_kind",
            f"`{field}` must be an object: {{description, schema?, keepVersions?}}.",
            field,
        )
    _unknown_fields(kind, KIND_FIELDS, f"{field}.")
    description = kind.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _refuse(
            "invalid_description",
            f"Kind {name!r} needs a non-empty `description` (people and models read it).",
            f"{field}.description",
        )
    keep = kind.get("keepVersions")
    if keep is not None:
        keep = _whole(
            keep,
            field=f"{field}.keepVersions",
            default=DEFAULT_KEEP_VERSIONS,
            code="invalid_keep_versions",
            what="a whole number of at least 1 (1 keeps no history), or null for the agent's",
        )
    schema = kind.get("schema")
    if schema is not None:
        _schema_check(name, schema, agent_tool=agent_tool)
    return {"description": description, "schema": schema, "keepVersions": keep}


def _schema_check(name: str, schema: JSON, *, agent_tool: bool) -> None:
    try:
        jsonschemas.check(schema)
        if agent_tool:
            strict_problem(schema)
    except jsonschemas.SchemaProblem as problem:
        raise ArtifactError(
            "invalid_schema",
            f"The schema of kind {name!r} is refused: {problem.message}.",
            {
                "field": f"kinds.{name}.schema",
                "kind": name,
                "at": problem.at,
                "problem": problem.message,
            },
        ) from None
