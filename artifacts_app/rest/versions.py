"""The history routes under ``/<slug>/v1/artifacts/<id>/`` (API.md "Versions, pins and diffs").

Thin like the other views: the caller through ``access`` (401/403 before any 404 of a hidden
record), one selector of ``versions`` or one service, orjson out. Versions are visible by their own
session (``access.visible``); a hidden version is a 404 like a missing one.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request

from artifacts_app import access, selectors, services
from artifacts_app.errors import NotFoundError
from artifacts_app.rest import serializers as s
from artifacts_app.rest.content import content_response
from artifacts_app.rest.filters import PageFilter, cleaned
from artifacts_app.rest.pagination import next_url
from artifacts_app.rest.schema import CURSOR, LIMIT, PAGE, VERSION, VERSION_MAX, errors
from artifacts_app.rest.views.base import AgentView, json_response
from artifacts_app.selectors import versions

VERSION_PARAMETER = OpenApiParameter(
    "number", int, OpenApiParameter.PATH, description="A version number (1 is the first tag)."
)


class VersionsView(AgentView):
    """The versions of a record the caller may see, newest first."""

    @extend_schema(
        operation_id="artifacts_versions",
        summary="The record's versions the caller may see, newest first",
        parameters=[LIMIT, CURSOR],
        responses={200: s.VersionPageSerializer, **errors(*PAGE, "unknown_artifact")},
    )
    def get(self, request: Request, slug: str, artifact_id: str) -> HttpResponse:
        agent = self.agent()
        visible = access.visible(self.caller(), agent)
        query = cleaned(PageFilter, request.query_params)
        page = versions.versions_page(
            agent=agent,
            artifact_id=artifact_id,
            visible=visible,
            limit=query["limit"],
            cursor=query["cursor"],
        )
        return json_response(
            {
                "results": [versions.version_json(row) for row in page.rows],
                "next": next_url(request, page.next_cursor),
            }
        )


class VersionDetailView(AgentView):
    @extend_schema(
        operation_id="artifacts_version",
        summary="One version: the record's fields as that tag stored them, `version` = n",
        parameters=[VERSION_PARAMETER],
        responses={200: s.RecordSerializer, **errors(*VERSION)},
    )
    def get(self, request: Request, slug: str, artifact_id: str, number: str) -> HttpResponse:
        agent = self.agent()
        visible = access.visible(self.caller(), agent)
        row = versions.version_values(
            agent=agent,
            artifact_id=artifact_id,
            number=versions.check_number(number),
            visible=visible,
        )
        return json_response(versions.version_json(row))


class VersionContentView(AgentView):
    @extend_schema(
        operation_id="artifacts_version_content",
        summary="That version's blob, under the content rules (Range, ETag, safe inline)",
        parameters=[
            VERSION_PARAMETER,
            OpenApiParameter(
                "Range", str, OpenApiParameter.HEADER, description="bytes=a-b, a- or -n"
            ),
            OpenApiParameter("If-None-Match", str, OpenApiParameter.HEADER),
        ],
        responses={
            (200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="The bytes."),
            (206, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="A range of the bytes."),
            304: OpenApiResponse(description="Not modified (ETag matched)."),
            **errors(*VERSION, "no_content", "range_not_satisfiable"),
        },
    )
    def get(self, request: Request, slug: str, artifact_id: str, number: str) -> HttpResponseBase:
        agent = self.agent()
        visible = access.visible(self.caller(), agent)
        n = versions.check_number(number)
        row = versions.version_values(
            agent=agent, artifact_id=artifact_id, number=n, visible=visible
        )
        if not row["blob_id"]:
            raise NotFoundError(
                "no_content",
                f"Version {n} of artifact {artifact_id!r} has no content; its record is all there is.",
            )
        return content_response(
            request, sha256=row["blob_id"], size=row["blob__size"], content_type=row["content_type"]
        )


class VersionDiffView(AgentView):
    @extend_schema(
        operation_id="artifacts_version_diff",
        summary="What changed from version `from` to version n: fields, and a JSON Patch of data",
        parameters=[
            VERSION_PARAMETER,
            OpenApiParameter(
                "from",
                {"type": "integer", "minimum": 1, "maximum": VERSION_MAX},
                description="The version to compare with (default: the newest visible one before n).",
            ),
        ],
        responses={200: s.DiffSerializer, **errors(*VERSION, "invalid_query")},
    )
    def get(self, request: Request, slug: str, artifact_id: str, number: str) -> HttpResponse:
        agent = self.agent()
        visible = access.visible(self.caller(), agent)
        from_ = request.query_params.get("from")
        return json_response(
            versions.versions_diff(
                agent=agent,
                artifact_id=artifact_id,
                number=versions.check_number(number),
                from_=None if from_ in (None, "") else versions.check_number(from_, field="from"),
                visible=visible,
            )
        )


class VersionRestoreView(AgentView):
    @extend_schema(
        operation_id="artifacts_version_restore",
        summary="A new version with version n's kind, title and data (agent key)",
        parameters=[VERSION_PARAMETER],
        request=None,
        responses={200: s.RecordSerializer, **errors(*VERSION, "not_keyed")},
    )
    def post(self, request: Request, slug: str, artifact_id: str, number: str) -> HttpResponse:
        agent = self.agent()
        caller = self.caller()
        access.require(caller, agent, access.Action.RESTORE)
        result = services.artifact_restore(
            agent=agent, artifact_id=artifact_id, number=versions.check_number(number)
        )
        return json_response(result.record.to_json())


class PinView(AgentView):
    """Pin (PUT) and unpin (DELETE): agent key and staff; a record the caller cannot see is 404."""

    def _pin(self, artifact_id: str, pinned: bool) -> HttpResponse:
        agent = self.agent()
        caller = self.caller()
        visible = access.visible(caller, agent)
        selectors.artifact_values(agent=agent, artifact_id=artifact_id, visible=visible)
        access.require(caller, agent, access.Action.PIN)
        record = services.artifact_pin(agent=agent, artifact_id=artifact_id, pinned=pinned)
        return json_response(record.to_json())

    @extend_schema(
        operation_id="artifacts_pin",
        summary="Pin the record: eviction skips it (agent key, staff)",
        request=None,
        responses={200: s.RecordSerializer, **errors("unknown_artifact", "cap_reached")},
    )
    def put(self, request: Request, slug: str, artifact_id: str) -> HttpResponse:
        return self._pin(artifact_id, True)

    @extend_schema(
        operation_id="artifacts_unpin",
        summary="Unpin the record (agent key, staff)",
        responses={200: s.RecordSerializer, **errors("unknown_artifact")},
    )
    def delete(self, request: Request, slug: str, artifact_id: str) -> HttpResponse:
        return self._pin(artifact_id, False)
