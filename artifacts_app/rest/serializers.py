"""Shapes for the OpenAPI schema (drf-spectacular). Output is built from ``.values()`` rows and
rendered with orjson (DESIGN.md §6); input is checked by the services, which hold every rule."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from artifacts_app.names import (
    CONTENT_TYPE_MAX,
    KEY_MAX,
    KIND_MAX,
    SESSION_ID_MAX,
    TITLE_MAX,
    TURN_MAX,
)


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


class TagSerializer(serializers.Serializer):
    kind = serializers.CharField(required=False, allow_null=True, max_length=KIND_MAX)
    key = serializers.CharField(required=False, allow_null=True, max_length=KEY_MAX)
    title = serializers.CharField(required=False, allow_null=True, max_length=TITLE_MAX)
    data = AnyJSONField(  # type: ignore[assignment]  # the wire field shadows Serializer.data
        help_text="Any JSON but null; checked against the kind's schema."
    )
    sessionId = serializers.CharField(required=False, allow_null=True, max_length=SESSION_ID_MAX)
    turnId = serializers.CharField(required=False, allow_null=True, max_length=TURN_MAX)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # shadows Field.source
        choices=["host", "model"], required=False
    )
    contents = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Stored as UTF-8. At most one of contents/contentsBase64.",
    )
    contentsBase64 = serializers.CharField(required=False, allow_null=True)
    contentType = serializers.CharField(
        required=False, allow_null=True, max_length=CONTENT_TYPE_MAX
    )


class TagMultipartSerializer(serializers.Serializer):
    record = serializers.CharField(
        help_text="The tag's JSON record (as for a JSON body, without contents)."
    )
    contents = serializers.FileField(help_text="The blob, streamed to storage.")


class SessionCreateSerializer(serializers.Serializer):
    id = serializers.CharField(required=False, allow_null=True, max_length=SESSION_ID_MAX)
    owner = serializers.CharField(required=False, allow_null=True)


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
    description = serializers.CharField(help_text="What this kind is, for people and models.")
    schema = serializers.DictField(
        required=False,
        allow_null=True,
        help_text="A JSON Schema (draft 2020-12), at most 64 KiB, every `$ref` local (`#…`); "
        "null or left out: any JSON.",
    )
    keepVersions = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="Overrides the agent's."
    )


class KindsDeclareSerializer(serializers.Serializer):
    """The body of ``PUT artifacts/kinds``: the whole declaration, replacing the one before."""

    kinds = serializers.DictField(
        child=KindDeclareSerializer(), help_text="Kind name -> its declaration; {} for freeform."
    )
    agentTool = serializers.BooleanField(
        required=False, default=False, help_text="Offer the tag_artifact tool (needs a kind)."
    )
    max = serializers.IntegerField(required=False, default=1000, min_value=1)
    keepVersions = serializers.IntegerField(required=False, default=10, min_value=1)


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = AnyJSONField(required=False)


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()
