"""``artifacts/kinds``: what an agent declares (GET, all three callers) and, for an agent without a
Python module, the declaration itself (PUT, its key; API.md "Kinds declared over HTTP")."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema

from artifacts_app import access, services
from artifacts_app.registry import AgentSpec, spec_for
from artifacts_app.rest import serializers as s
from artifacts_app.rest.schema import JSON_BODY, KINDS, errors
from artifacts_app.rest.views.base import AgentView, json_response


def kinds_json(spec: AgentSpec) -> dict[str, Any]:
    """What ``GET artifacts/kinds`` answers (and ``PUT`` once it has stored a declaration)."""
    return {
        "kinds": [
            {
                "name": name,
                "description": kind.description,
                "schema": kind.json_schema(),
                "keepVersions": kind.keep_versions,
            }
            for name, kind in sorted(spec.kinds.items())
        ],
        "max": spec.max,
        "agentTool": spec.tool_enabled,
        "keepVersions": spec.keep_versions,
    }


class KindsView(AgentView):
    """What the agent declares: its kinds with their JSON Schema, its cap and its tool switch."""

    @extend_schema(
        operation_id="artifacts_kinds",
        summary="The agent's kinds, cap and tool switch",
        responses={200: s.KindsSerializer, **errors()},
    )
    def get(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.READ)
        return json_response(kinds_json(spec_for(agent)))

    @extend_schema(
        operation_id="artifacts_kinds_declare",
        summary="Declare the agent's kinds (agent key; agents without a Python module)",
        description=(
            "Replaces the whole declaration and answers what GET then answers. Schemas are JSON "
            "Schema draft 2020-12, at most 64 KiB, every `$ref` local (nothing is fetched); with "
            "`agentTool` on, a schema OpenAI strict mode cannot express is refused, naming the "
            "keyword. Lowering `max` below what the agent holds evicts the oldest-updated unpinned "
            "records now, with `artifact.deleted` events. Records stored already are not "
            "revalidated."
        ),
        request=s.KindsDeclareSerializer,
        responses={
            200: s.KindsSerializer,
            **errors(*JSON_BODY, *KINDS),
        },
    )
    def put(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.DECLARE)  # before the body is read
        agent = services.kinds_declare(agent=agent, declaration=request.data)
        return json_response(kinds_json(spec_for(agent)))
