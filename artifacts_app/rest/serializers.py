"""Shapes for the OpenAPI schema (drf-spectacular). Output is built from ``.values()`` rows and
rendered with orjson (DESIGN.md §6); input is checked by the services, which hold every rule."""

from __future__ import annotations

from django.core.validators import RegexValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from artifacts_app import media
from artifacts_app.names import (
    CONTENT_TYPE_MAX,
    KEY_MAX,
    KIND_PATTERN,
    SESSION_ID_PATTERN,
    TITLE_MAX,
    TURN_MAX,
)
from artifacts_app.services.kinds import COLUMN_MAX


def pattern(body: str) -> list[RegexValidator]:
    """A validator the schema shows as ``pattern`` (anchored); the services hold the rule."""
    return [RegexValidator(f"^{body}$")]


# Text that reaches the database: no U+0000 (values.text_problem), at most ``n`` characters.
def text(low: int, high: int) -> list[RegexValidator]:
    return pattern(f"[^\\u0000]{{{low},{high}}}")


# One media type, as media.parse reads it: type/subtype, ;name=value parameters, no comma.
_QUOTED_NO_COMMA = media._QUOTED.replace("\\x23-\\x5b", "\\x23-\\x2b\\x2d-\\x5b").replace(
    "\\x20-\\x7e", "\\x20-\\x2b\\x2d-\\x7e"
)
_MEDIA_TYPE = (
    f"{media._TOKEN}/{media._TOKEN}"
    f"(?:[ \\t]*;[ \\t]*{media._TOKEN}=(?:{media._TOKEN}|{_QUOTED_NO_COMMA}))*"
    "(?:[ \\t]*;)?"
)
MEDIA_TYPE_PATTERN = f"[ \\t]*{_MEDIA_TYPE}[ \\t]*"  # a JSON contentType: media.parse strips it
# A header value: HTTP trims the whitespace around it. (Stating it again for a header, where no
# value can have it, makes hypothesis's generation of the header ~3x cheaper.)
MEDIA_TYPE_HEADER_PATTERN = _MEDIA_TYPE
BASE64_PATTERN = "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"


@extend_schema_field(OpenApiTypes.ANY)
class AnyJSONField(serializers.JSONField):
    pass


class ContentSerializer(serializers.Serializer):
    size = serializers.IntegerField(min_value=0)
    contentType = serializers.CharField()
    sha256 = serializers.CharField()


class RecordSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    key = serializers.CharField(allow_null=True)
    title = serializers.CharField(allow_null=True)
    data = AnyJSONField()  # type: ignore[assignment]  # the wire field shadows Serializer.data
    sessionId = serializers.CharField(allow_null=True)
    turnId = serializers.CharField(allow_null=True)
    source = serializers.ChoiceField(choices=["host", "model"])  # type: ignore[assignment]  # shadows Field.source
    content = ContentSerializer(allow_null=True)
    version = serializers.IntegerField(
        min_value=1,
        help_text="The number of the record's current version (for a version: its own).",
    )
    pinned = serializers.BooleanField(help_text="Whether eviction skips this record.")
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class RecordPageSerializer(serializers.Serializer):
    results = RecordSerializer(many=True)
    next = serializers.URLField(allow_null=True)


class VersionPageSerializer(serializers.Serializer):
    results = RecordSerializer(
        many=True,
        help_text="Versions the caller may see, newest first; `updatedAt` is when each was tagged.",
    )
    next = serializers.URLField(allow_null=True)


class FieldChangeSerializer(serializers.Serializer):
    to = AnyJSONField()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = dict(super().get_fields())
        fields["from"] = AnyJSONField()  # a Python keyword, so added by name
        return fields


class JsonPatchOpSerializer(serializers.Serializer):
    op = serializers.ChoiceField(choices=["add", "remove", "replace", "move", "copy", "test"])
    path = serializers.CharField(allow_blank=True)
    value = AnyJSONField(required=False)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = dict(super().get_fields())
        fields["from"] = serializers.CharField(required=False, allow_blank=True)
        return fields


class DiffSerializer(serializers.Serializer):
    to = serializers.IntegerField(min_value=1)

    def get_fields(self) -> dict[str, serializers.Field]:
        # `from` is a Python keyword, `fields` and `data` are a Serializer's own attributes:
        # the three are added by name.
        fields = dict(super().get_fields())
        fields["from"] = serializers.IntegerField(min_value=1)
        fields["fields"] = serializers.DictField(
            child=FieldChangeSerializer(),
            help_text="Each of kind, title, sessionId, turnId, source, content that differs.",
        )
        fields["data"] = JsonPatchOpSerializer(
            many=True, help_text="RFC 6902 JSON Patch that turns `from`'s data into `to`'s."
        )
        return fields


@extend_schema_field(
    {
        "description": "Any JSON but null; checked against the kind's schema. Integers within "
        "64 bits, floats below 2**63 in magnitude, no U+0000 or lone surrogates in strings and "
        'keys, at most 100 levels deep (API.md "Errors").',
        "anyOf": [
            {"type": "object"},
            {"type": "array"},
            {"type": "string", "pattern": "^[^\\u0000]*$"},
            {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
            {"type": "number", "minimum": -(2**63) + 1024, "maximum": 2**63 - 1024},
            {"type": "boolean"},
        ],
    }
)
class DataField(serializers.JSONField):
    pass


class TagSerializer(serializers.Serializer):
    kind = serializers.CharField(
        required=False,
        allow_null=True,
        validators=pattern(KIND_PATTERN),
        help_text="One of the agent's kinds (GET artifacts/kinds): required when it declares "
        "any (else 400 unknown_kind); with none declared, any name, and left out or null it is "
        "`artifact`.",
    )
    key = serializers.CharField(
        required=False,
        allow_null=True,
        validators=text(1, KEY_MAX),
        help_text="The upsert handle; leave it out (or null) for an unkeyed record.",
    )
    title = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, validators=text(0, TITLE_MAX)
    )
    data = DataField()  # type: ignore[assignment]  # the wire field shadows Serializer.data
    sessionId = serializers.CharField(
        required=False,
        allow_null=True,
        validators=pattern(SESSION_ID_PATTERN),
        help_text="An existing session of this agent (else 404 unknown_session).",
    )
    turnId = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, validators=text(0, TURN_MAX)
    )
    source = serializers.ChoiceField(  # type: ignore[assignment]  # shadows Field.source
        choices=["host", "model"], required=False
    )
    contents = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        help_text="Stored as UTF-8. At most one of contents/contentsBase64.",
    )
    contentsBase64 = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, validators=pattern(BASE64_PATTERN)
    )
    contentType = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=CONTENT_TYPE_MAX,
        validators=pattern(MEDIA_TYPE_PATTERN),
        help_text="One media type (no comma); only with contents.",
    )


class TagMultipartSerializer(serializers.Serializer):
    # The schema shows `record` as the JSON body's object (TagRequest), encoded application/json
    # (rest.schema.postprocess); the serializer only names the parts. The body is closed: any
    # other part is refused (rest.parsers.MultiPartParser.PARTS), and each part comes once.
    record = serializers.JSONField(
        help_text="The tag's JSON record, as for a JSON body (text in the request's charset, "
        "UTF-8 unless it names another); its contents, if any, come as the part `contents` "
        "instead."
    )
    contents = serializers.FileField(
        required=False,
        help_text="The blob, streamed to storage, with or without a `filename`; its own "
        "Content-Type is the content type when the record names none.",
    )


class SessionCreateSerializer(serializers.Serializer):
    id = serializers.CharField(
        required=False, allow_null=True, validators=pattern(SESSION_ID_PATTERN)
    )
    owner = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="A username (agent key: any user or null; a user: itself).",
    )


class SessionSerializer(serializers.Serializer):
    id = serializers.CharField()
    owner = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()


class SessionPageSerializer(serializers.Serializer):
    results = SessionSerializer(many=True)
    next = serializers.URLField(allow_null=True)


class KindSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    schema = serializers.DictField(allow_null=True)
    keepVersions = serializers.IntegerField(
        allow_null=True, help_text="Versions kept per record of this kind; null: the agent's."
    )


class KindsSerializer(serializers.Serializer):
    kinds = KindSerializer(many=True)
    max = serializers.IntegerField()
    agentTool = serializers.BooleanField()
    keepVersions = serializers.IntegerField(help_text="Versions kept per record (default 10).")


class KindDeclareSerializer(serializers.Serializer):
    description = serializers.CharField(
        # Not only whitespace (services.kinds strips it), no U+0000 (values.check_value).
        validators=pattern("[^\\u0000]*[^\\s\\u0000][^\\u0000]*"),
        help_text="What this kind is, for people and models.",
    )
    schema = serializers.DictField(
        required=False,
        allow_null=True,
        help_text="A JSON Schema (draft 2020-12), at most 64 KiB, every `$ref` local (`#…`); "
        "null or left out: any JSON.",
    )
    keepVersions = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=COLUMN_MAX,
        help_text="Overrides the agent's; left out or null: the agent's.",
    )


class KindsDeclareSerializer(serializers.Serializer):
    """The body of ``PUT artifacts/kinds``: the whole declaration, replacing the one before."""

    kinds = serializers.DictField(
        child=KindDeclareSerializer(), help_text="Kind name -> its declaration; {} for freeform."
    )
    agentTool = serializers.BooleanField(
        required=False, default=False, help_text="Offer the tag_artifact tool (needs a kind)."
    )
    # null is taken as left out (services.kinds), as for a kind's keepVersions.
    max = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=1000,
        min_value=1,
        max_value=COLUMN_MAX,
        help_text="Left out or null: 1000.",
    )
    keepVersions = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=10,
        min_value=1,
        max_value=COLUMN_MAX,
        help_text="Versions kept per record; left out or null: 10.",
    )


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = AnyJSONField(required=False)


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()
