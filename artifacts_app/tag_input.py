"""The tag's input, declared once (API.md "Tag"): each field's wire name, the keyword it becomes in
``services.artifact_tag``, its type, nullability and limits, the code a bad value is refused with,
and its words for the docs and for the model.

Everything that reads or describes a tag's input derives from ``FIELDS``:

- REST's JSON body and a multipart ``record`` (``NAMES`` closes them, ``arguments`` reads them;
  the contents fields are read together, ``content``);
- the rules that need no database (``services.rules.tag_validate``: limits and refusal codes);
- the model's ``tag_artifact`` tool (``MODEL_FIELDS``: its definition, ``tool.parse_call``) and so
  MCP's tag tool, which is that tool;
- the OpenAPI schema's ``TagRequest`` (``openapi_schema``), and through it the kits' contract tests.

Adding a field: one entry here (and in ``FIELDS``), its keyword on ``services.artifact_tag`` and
``services.rules.tag_validate`` with its rule; ``tests/rest/test_tag_input.py`` holds every entry
point to this table.

Low in the layers: it knows ``names`` and ``media``'s grammar only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from artifacts_app import media
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.names import (
    CONTENT_TYPE_MAX,
    KEY_MAX,
    KIND_PATTERN,
    SESSION_ID_PATTERN,
    TITLE_MAX,
    TURN_MAX,
)


@dataclass(frozen=True, kw_only=True)
class TagField:
    """One field of the tag's input."""

    name: str
    """On the wire: the JSON body, a multipart ``record``, the tool's ``artifact``."""
    param: str
    """The keyword of ``services.artifact_tag`` it becomes (the contents fields share theirs)."""
    code: str
    """What a bad value is refused with (400)."""
    schema: JSONObject
    """Its value's schema (OpenAPI 3.0), null aside: ``nullable`` says whether null is taken."""
    required: bool = False
    nullable: bool = True
    default: str | None = None
    """Taken when the field is left out or null."""
    max_length: int | None = None
    """Characters, for text the rules check (``services.rules``)."""
    description: str | None = None
    """For the docs (the OpenAPI schema)."""
    content: bool = False
    """One of the contents fields: read together (the view's ``_contents``, or a multipart file
    part), never passed as its own keyword."""
    model: bool = False
    """The model's ``tag_artifact`` tool takes it, under ``artifact``."""
    model_description: str | None = None
    """What the model reads about it (``kind`` and ``data`` are described by the kinds)."""

    def openapi(self) -> JSONObject:
        """Its property in the OpenAPI schema's ``TagRequest``."""
        found: JSONObject = dict(self.schema)
        if self.nullable:
            found["nullable"] = True
        if self.description is not None:
            found["description"] = self.description
        return found


def _text(low: int, high: int) -> JSONObject:
    # Text that reaches the database: no U+0000 (values.text_problem), ``low`` to ``high``
    # characters; an empty string is refused where ``low`` is 1.
    found: JSONObject = {"type": "string", "pattern": f"^[^\\u0000]{{{low},{high}}}$"}
    if low:
        found["minLength"] = 1
    return found


def _ecma(pattern: str) -> str:
    # The OpenAPI schema's patterns are ECMA-262: ``\xNN`` is written ``\u00NN`` there.
    return pattern.replace("\\x", "\\u00")


BASE64_PATTERN = "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
"""Standard base64 with its padding, as ``contentsBase64`` is decoded."""

DATA_SCHEMA: JSONObject = {
    "anyOf": [
        {"type": "object"},
        {"type": "array"},
        {"type": "string", "pattern": "^[^\\u0000]*$"},
        {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
        {"type": "number", "minimum": -(2**63) + 1024, "maximum": 2**63 - 1024},
        {"type": "boolean"},
    ],
}
"""Any JSON but null, within what both databases hold (``values.check_value``)."""

KIND = TagField(
    name="kind",
    param="kind",
    code="invalid_kind",
    schema={"type": "string", "minLength": 1, "pattern": f"^{KIND_PATTERN}$"},
    description="One of the agent's kinds (GET artifacts/kinds): required when it declares "
    "any (else 400 unknown_kind); with none declared, any name, and left out or null it is "
    "`artifact`.",
    model=True,
)
KEY = TagField(
    name="key",
    param="key",
    code="invalid_key",
    schema=_text(1, KEY_MAX),
    max_length=KEY_MAX,
    description="The upsert handle; leave it out (or null) for an unkeyed record.",
    model=True,
    model_description="A stable identity for this artifact, such as its URL or path: tagging "
    "the same key again replaces that artifact instead of adding another. null for a one-off "
    "output.",
)
TITLE = TagField(
    name="title",
    param="title",
    code="invalid_title",
    schema=_text(0, TITLE_MAX),
    max_length=TITLE_MAX,
    model=True,
    model_description=f"A short title a person will see in a list (at most {TITLE_MAX} "
    "characters); null for none.",
)
DATA = TagField(
    name="data",
    param="data",
    code="invalid_data",
    schema=DATA_SCHEMA,
    required=True,
    nullable=False,
    description="Any JSON but null; checked against the kind's schema. Integers within "
    "64 bits, floats below 2**63 in magnitude, no U+0000 or lone surrogates in strings and "
    'keys, at most 100 levels deep (API.md "Errors").',
    model=True,
)
SESSION_ID = TagField(
    name="sessionId",
    param="session_id",
    code="invalid_session_id",
    schema={"type": "string", "minLength": 1, "pattern": f"^{SESSION_ID_PATTERN}$"},
    description="An existing session of this agent (else 404 unknown_session).",
)
TURN_ID = TagField(
    name="turnId",
    param="turn_id",
    code="invalid_turn_id",
    schema=_text(0, TURN_MAX),
    max_length=TURN_MAX,
)
SOURCE = TagField(
    name="source",
    param="source",
    code="invalid_source",
    schema={"type": "string", "enum": ["host", "model"]},
    nullable=False,
    default="host",
)
CONTENTS = TagField(
    name="contents",
    param="contents",
    code="invalid_contents",
    schema={"type": "string"},
    description="Stored as UTF-8. At most one of contents/contentsBase64.",
    content=True,
)
CONTENTS_BASE64 = TagField(
    name="contentsBase64",
    param="contents",
    code="invalid_base64",
    schema={"type": "string", "pattern": f"^{BASE64_PATTERN}$"},
    content=True,
)
CONTENT_TYPE = TagField(
    name="contentType",
    param="content_type",
    code="invalid_content_type",
    # media.parse strips the whitespace around a JSON contentType.
    schema={
        "type": "string",
        "minLength": 1,
        "maxLength": CONTENT_TYPE_MAX,
        "pattern": f"^[ \\t]*{_ecma(media.PATTERN)}[ \\t]*$",
    },
    description="One media type (no comma); only with contents.",
    content=True,
)

UPLOAD_ID_PATTERN = "up_[A-Za-z0-9_-]{1,37}"
"""An upload's id, as ``POST uploads`` makes it."""
SHA256_PATTERN = "[0-9a-f]{64}"

UPLOAD = TagField(
    name="upload",
    param="upload",
    code="invalid_upload",
    schema={"type": "string", "pattern": f"^{UPLOAD_ID_PATTERN}$"},
    description="A finished resumable upload of this agent (POST uploads, tus) as the contents, "
    "instead of `contents`; `contentType` left out is the upload's metadata's. Used once.",
)
CONTENTS_SHA256 = TagField(
    name="contentsSha256",
    param="contents_sha256",
    code="invalid_contents_sha256",
    schema={"type": "string", "pattern": f"^{SHA256_PATTERN}$"},
    description="Known contents: the sha256 (lowercase hex) of contents this agent already "
    "stores, with `contentsSize`, instead of the bytes; else 409 contents_unknown.",
)
CONTENTS_SIZE = TagField(
    name="contentsSize",
    param="contents_size",
    code="invalid_contents_size",
    schema={"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    description="Known contents: their size in bytes, with `contentsSha256`.",
)

FIELDS: tuple[TagField, ...] = (
    KIND,
    KEY,
    TITLE,
    DATA,
    SESSION_ID,
    TURN_ID,
    SOURCE,
    CONTENTS,
    CONTENTS_BASE64,
    CONTENT_TYPE,
    UPLOAD,
    CONTENTS_SHA256,
    CONTENTS_SIZE,
)
NAMES = frozenset(field.name for field in FIELDS)
"""A JSON body's (and a multipart ``record``'s) fields: any other is refused (``unknown_field``)."""
MODEL_FIELDS: tuple[TagField, ...] = tuple(field for field in FIELDS if field.model)
"""The fields of the model's ``artifact``, in the tool's order."""


_ARGUMENTS = tuple((f.name, f.param, f.default) for f in FIELDS if not f.content)


def arguments(body: Mapping[str, JSON]) -> dict[str, JSON]:
    """The keywords of ``services.artifact_tag`` a body's fields give, the contents fields aside
    (each left out or null is its default)."""
    found: dict[str, JSON] = {}
    for name, param, default in _ARGUMENTS:
        value = body.get(name)
        found[param] = default if value is None else value
    return found


def openapi_schema() -> JSONObject:
    """The OpenAPI schema of a tag's JSON body (``TagRequest``): closed."""
    return {
        "type": "object",
        "properties": {field.name: field.openapi() for field in FIELDS},
        "required": [field.name for field in FIELDS if field.required],
        "additionalProperties": False,
    }
