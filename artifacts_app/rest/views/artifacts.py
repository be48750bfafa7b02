"""Artifacts under ``/<slug>/v1/artifacts`` (API.md "HTTP routes"): list, one record, delete, and
the tag's bodies to answers (``tag_json``, ``tag_multipart``), which the tag route
(``rest/lean.py``, answered before URL resolution) calls; ``ArtifactsView.post`` declares the tag
to the OpenAPI schema."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpResponse, QueryDict
from django.utils.datastructures import MultiValueDict
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request

from artifacts_app import access, media, selectors, services, tag_input
from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.models import Agent
from artifacts_app.names import KEY_MAX, KIND_MAX, SESSION_ID_MAX, SLUG_PATTERN
from artifacts_app.records import record_json
from artifacts_app.rest import serializers as s
from artifacts_app.rest.filters import ArtifactFilter, cleaned
from artifacts_app.rest.pagination import next_url
from artifacts_app.rest.parsers import (
    JSONParser,
    MultiPartParser,
    part_content_type,
)
from artifacts_app.rest.schema import (
    CURSOR,
    JSON_BODY,
    LIMIT,
    PAGE,
    SEARCH,
    TAG,
    anchored,
    errors,
    query_text,
)
from artifacts_app.rest.views.base import AgentView, json_response, object_body
from artifacts_app.services import TagResult
from artifacts_app.services.artifacts import Contents
from artifacts_app.values import json_loads

# A JSON body's and a multipart record's fields (``tag_input`` declares them).
TAG_FIELDS = tag_input.NAMES


def _contents(body: JSONObject) -> bytes | str | None:
    text, encoded = body.get("contents"), body.get("contentsBase64")
    if text is not None and encoded is not None:
        raise ArtifactError(
            "contents_conflict",
            "Send at most one of `contents` and `contentsBase64`.",
            {"fields": ["contents", "contentsBase64"]},
        )
    if text is not None:
        if not isinstance(text, str):
            raise ArtifactError(
                "invalid_contents",
                "`contents` is a string (stored as UTF-8); send bytes as `contentsBase64`.",
                {"field": "contents"},
            )
        return text
    if encoded is not None:
        if not isinstance(encoded, str):
            raise ArtifactError(
                "invalid_base64",
                "`contentsBase64` is a base64 string.",
                {"field": "contentsBase64"},
            )
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ArtifactError(
                "invalid_base64",
                "`contentsBase64` is not valid base64 (standard alphabet, with padding).",
                {"field": "contentsBase64"},
            ) from None
    return None


def _tag(
    agent: Agent, body: JSONObject, contents: Contents | None, content_type: JSON
) -> TagResult:
    return services.artifact_tag(
        agent=agent, contents=contents, content_type=content_type, **tag_input.arguments(body)
    )


def tag_json(agent: Agent, data: JSON) -> HttpResponse:
    """A JSON tag's body (parsed) to its answer."""
    body = object_body(data, TAG_FIELDS)
    result = _tag(agent, body, _contents(body), body.get("contentType"))
    return json_response(result.record.to_json(), status=201 if result.created else 200)


class ArtifactsView(AgentView):
    """Artifacts of the agent: list (filters, keyset pages) and tag (agent key; JSON or multipart)."""

    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(
        operation_id="artifacts_list",
        summary="List artifacts, newest-updated first (ties by id)",
        parameters=[
            OpenApiParameter("kind", query_text(KIND_MAX)),
            OpenApiParameter("sessionId", query_text(SESSION_ID_MAX)),
            OpenApiParameter("source", str, enum=["host", "model"]),
            OpenApiParameter("key", query_text(KEY_MAX)),
            *SEARCH,
            LIMIT,
            CURSOR,
        ],
        responses={200: s.RecordPageSerializer, **errors(*PAGE, "unknown_session")},
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        agent = self.agent()
        visible = access.visible(self.caller(), agent)
        query = cleaned(ArtifactFilter, request.query_params)
        page = selectors.artifacts_page(
            agent=agent,
            visible=visible,
            kind=query["kind"],
            session_id=query["sessionId"],
            source=query["source"],
            key=query["key"],
            q=query["q"],
            where=query["where"],
            limit=query["limit"],
            cursor=query["cursor"],
        )
        return json_response(
            {
                "results": [record_json(row) for row in page.rows],
                "next": next_url(request, page.next_cursor),
            }
        )

    @extend_schema(
        operation_id="artifacts_tag",
        summary="Tag an artifact (agent key): 201 created, 200 replaced",
        request={
            "application/json": s.TagSerializer,
            "multipart/form-data": s.TagMultipartSerializer,
        },
        responses={
            201: OpenApiResponse(s.RecordSerializer, description="Created."),
            200: OpenApiResponse(s.RecordSerializer, description="Replaced (same key)."),
            **errors(
                *JSON_BODY,
                *TAG,
                "invalid_base64",
                "contents_conflict",
                "record_required",
                "malformed_multipart",
                "too_many_fields",
            ),
        },
    )
    def post(self, request: Request, slug: str) -> HttpResponse:
        """The tag, declared here for the OpenAPI schema and ``Allow`` only: every POST on this
        path is answered before URL resolution by ``rest/lean.py`` (``TagRouteMiddleware``, last
        in ``MIDDLEWARE``: the system check ``artifacts.E105``), so this is never called."""
        raise ImproperlyConfigured(
            "POST /<slug>/v1/artifacts reached the DRF view: TagRouteMiddleware "
            "(artifacts_app.rest.lean) must be the last entry of MIDDLEWARE."
        )


def tag_multipart(
    agent: Agent, data: QueryDict, files: MultiValueDict[str, UploadedFile]
) -> HttpResponse:
    """A multipart tag's parts (parsed: ``record``, the file part ``contents`` already in storage)
    to its answer."""
    raw = data.get("record")
    if raw is None:
        raise ArtifactError(
            "record_required",
            "A multipart tag needs a `record` part holding the JSON record.",
            {"field": "record"},
        )
    body = object_body(json_loads(raw, what="The `record` part", field="record"), TAG_FIELDS)
    upload = files.get("contents")
    contents: Contents | None
    if upload is None:
        contents, content_type = _contents(body), body.get("contentType")
    else:
        if body.get("contents") is not None or body.get("contentsBase64") is not None:
            raise ArtifactError(
                "contents_conflict",
                "The file part `contents` is the contents; leave contents/contentsBase64 out of `record`.",
                {"fields": ["contents", "contentsBase64"]},
            )
        content_type = body.get("contentType")
        if content_type is None:
            sent = part_content_type(upload)
            if sent is not None and media.parse(sent) is None:
                raise ArtifactError(
                    "invalid_content_type",
                    "The file part `contents` has a Content-Type that is not exactly one media "
                    "type (type/subtype and ;name=value parameters, no comma); send one, or name "
                    "`contentType` in `record`.",
                    {"field": "contents"},
                )
            content_type = sent
        contents = upload
    result = _tag(agent, body, contents, content_type)
    return json_response(result.record.to_json(), status=201 if result.created else 200)


ACROSS_PARAMETERS = frozenset(
    {"agent", "kind", "sessionId", "source", "key", "q", "where", "limit", "cursor"}
)


class ArtifactsAcrossView(AgentView):
    """``GET /api/v1/artifacts``: the list and its search across every agent the caller may see
    (API.md "Search"); each record carries ``agent``, its agent's slug."""

    @extend_schema(
        operation_id="artifacts_across",
        summary="List artifacts across agents, newest-updated first (ties by id)",
        parameters=[
            OpenApiParameter(
                "agent",
                {"type": "string", "pattern": anchored(SLUG_PATTERN)},
                # Repeatable (?agent=a&agent=b); stated as one string: a query's array form
                # cannot tell the slug "false" from a boolean.
                description=(
                    "An agent's slug; repeat the parameter for several. None: every agent the "
                    "caller may see."
                ),
            ),
            OpenApiParameter("kind", query_text(KIND_MAX)),
            OpenApiParameter("sessionId", query_text(SESSION_ID_MAX)),
            OpenApiParameter("source", str, enum=["host", "model"]),
            OpenApiParameter("key", query_text(KEY_MAX)),
            *SEARCH,
            LIMIT,
            CURSOR,
        ],
        responses={200: s.AcrossPageSerializer, **errors(*PAGE)},
    )
    def get(self, request: Request) -> HttpResponse:
        visible = access.visible_across(self.caller())
        unknown = sorted(set(request.query_params) - ACROSS_PARAMETERS)
        if unknown:
            # A misspelt filter (``agents=``) would otherwise widen the list to every agent.
            raise ArtifactError(
                "invalid_query",
                f"Unknown query parameter {unknown[0]!r}; the parameters are "
                f"{', '.join(sorted(ACROSS_PARAMETERS))}.",
                {"fields": unknown},
            )
        query = cleaned(ArtifactFilter, request.query_params)
        page = selectors.artifacts_across(
            visible=visible,
            agents=request.query_params.getlist("agent") or None,
            kind=query["kind"],
            session_id=query["sessionId"],
            source=query["source"],
            key=query["key"],
            q=query["q"],
            where=query["where"],
            limit=query["limit"],
            cursor=query["cursor"],
        )
        return json_response(
            {
                "results": [{**record_json(row), "agent": row["agent__slug"]} for row in page.rows],
                "next": next_url(request, page.next_cursor),
            }
        )

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # HttpResponse (as base.py)
        access.visible_across(self.caller())
        response = HttpResponse(status=204)
        response["Allow"] = ", ".join(self.allowed_methods)
        return response


class ArtifactDetailView(AgentView):
    """One record: read (all three callers) and delete (agent key, staff)."""

    @extend_schema(
        operation_id="artifacts_get",
        summary="One record",
        responses={200: s.RecordSerializer, **errors("unknown_artifact")},
    )
    def get(self, request: Request, slug: str, artifact_id: str) -> HttpResponse:
        agent = self.agent()
        visible = access.visible(self.caller(), agent)
        row = selectors.artifact_values(agent=agent, artifact_id=artifact_id, visible=visible)
        return json_response(record_json(row))

    @extend_schema(
        operation_id="artifacts_delete",
        summary="Delete a record and its content (agent key, staff)",
        responses={204: None, **errors("unknown_artifact")},
    )
    def delete(self, request: Request, slug: str, artifact_id: str) -> HttpResponse:
        agent = self.agent()
        caller = self.caller()
        visible = access.visible(caller, agent)
        selectors.artifact_values(agent=agent, artifact_id=artifact_id, visible=visible)
        access.require(caller, agent, access.Action.DELETE)
        services.artifact_delete(agent=agent, artifact_id=artifact_id)
        return HttpResponse(status=204)
