"""Shapes for the OpenAPI schema (drf-spectacular). Output is built from ``.values()`` rows and
rendered with orjson (DESIGN.md §6); input is checked by the services, which hold every rule."""

from __future__ import annotations

from django.core.validators import RegexValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from artifacts_app import media
from artifacts_app.names import SESSION_ID_PATTERN
from artifacts_app.services.kinds import COLUMN_MAX


def pattern(body: str) -> list[RegexValidator]:
    """A validator the schema shows as ``pattern`` (anchored); the services hold the rule."""
    return [RegexValidator(f"^{body}$")]


# Text that reaches the database: no U+0000 (values.text_problem), at most ``n`` characters.
def text(low: int, high: int) -> list[RegexValidator]:
    return pattern(f"[^\\u0000]{{{low},{high}}}")


# A Content-Type header's value: one media type, as media.parse reads it (HTTP trims the
# whitespace around a header's value, so the pattern has none).
MEDIA_TYPE_HEADER_PATTERN = media.PATTERN


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


class AcrossRecordSerializer(RecordSerializer):
    agent = serializers.CharField(help_text="The record's agent (its slug).")


class AcrossPageSerializer(serializers.Serializer):
    results = AcrossRecordSerializer(many=True)
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


class TagSerializer(serializers.Serializer):
    """A tag's JSON body. Its fields are declared once, in ``tag_input``: the schema shows
    ``tag_input.openapi_schema()`` (``rest.schema.TagInputExtension``), and the view reads the
    body with ``tag_input`` too; the services hold every rule."""


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
