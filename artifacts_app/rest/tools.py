"""``GET``/``POST /<slug>/v1/tools/tag_artifact``: the model-facing tool and running its calls.

GET (agent key, staff) answers the definition in ``?format=anthropic|openai|openai-responses``
(``anthropic`` when left out; 404 when the agent offers no built-in tool). POST (agent key) runs a
model's call through ``services.tool_run`` and answers like a tag: 201/200 with the record, or 400
with a message written so that the model can correct its call.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers

from artifacts_app import access, services, tool
from artifacts_app.names import SESSION_ID_PATTERN, TURN_MAX
from artifacts_app.registry import spec_for
from artifacts_app.rest import serializers as s
from artifacts_app.rest.schema import JSON_BODY, TAG, errors
from artifacts_app.rest.views.base import AgentView, json_response, object_body

RUN_FIELDS = frozenset({"input", "sessionId", "turnId"})


@extend_schema_field(
    {
        "anyOf": [
            {
                "type": "object",
                "properties": {"artifact": {"type": "object"}},
                "required": ["artifact"],
            },
            {"type": "string", "description": "The same object as JSON text."},
        ]
    }
)
class ToolInputField(serializers.JSONField):
    pass


class ToolView(AgentView):
    """The agent's built-in ``tag_artifact`` tool."""

    @extend_schema(
        operation_id="tools_tag_artifact_get",
        summary="The model-facing tag_artifact tool (agent key, staff)",
        parameters=[
            OpenApiParameter("format", str, enum=list(tool.FORMATS), default=tool.DEFAULT_FORMAT),
        ],
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="The tool definition."),
            **errors("unknown_format", "tool_not_offered"),
        },
    )
    def get(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.TOOL_DEFINITION)
        fmt = request.query_params.get("format")
        return json_response(tool.tool_definition(spec_for(agent), fmt))

    @extend_schema(
        operation_id="tools_tag_artifact_run",
        summary="Run a model's tag_artifact call (agent key); tags with source model",
        request=inline_serializer(
            "ToolRun",
            {
                "input": ToolInputField(
                    help_text="The tool call's input, as the model sent it: an object, or its "
                    "JSON text."
                ),
                "sessionId": serializers.CharField(
                    required=False, allow_null=True, validators=s.pattern(SESSION_ID_PATTERN)
                ),
                "turnId": serializers.CharField(
                    required=False,
                    allow_null=True,
                    allow_blank=True,
                    validators=s.text(0, TURN_MAX),
                ),
            },
        ),
        responses={
            201: OpenApiResponse(s.RecordSerializer, description="Created."),
            200: OpenApiResponse(s.RecordSerializer, description="Replaced (same key)."),
            **errors(*JSON_BODY, *TAG, "tool_input_invalid", "tool_not_offered"),
        },
    )
    def post(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.TAG)
        tool.require_tool(spec_for(agent))
        body = object_body(request.data, RUN_FIELDS)
        if "input" not in body:
            raise tool.ToolInputError(
                'The body needs `input`: the tool call\'s input, {"artifact": {...}}.', "input"
            )
        result = services.tool_run(
            agent=agent,
            input=body["input"],
            session_id=body.get("sessionId"),
            turn_id=body.get("turnId"),
        )
        return json_response(result.record.to_json(), status=201 if result.created else 200)
