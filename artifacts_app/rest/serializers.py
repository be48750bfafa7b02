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
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class RecordPageSerializer(serializers.Serializer):
    results = RecordSerializer(many=True)
    next = serializers.URLField(allow_null=True)


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


class KindsSerializer(serializers.Serializer):
    kinds = KindSerializer(many=True)
    max = serializers.IntegerField()
    agentTool = serializers.BooleanField()


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = AnyJSONField(required=False)


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()
