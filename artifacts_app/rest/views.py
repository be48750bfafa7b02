"""The REST views under ``/<slug>/v1/`` (API.md "HTTP routes").

Each view parses, asks ``access`` about the caller, calls one service or selector and formats.
Sync views: under daphne that is one thread hop for the whole request (DESIGN.md §11); content is
streamed from an async generator (``content.py``).
"""

from __future__ import annotations

import base64
import binascii
from typing import IO, Any, cast

import orjson
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.views import APIView

from artifacts_app import access, media, selectors, services
from artifacts_app.blobs import content_too_large, max_content_bytes
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.models import Agent
from artifacts_app.names import KEY_MAX, KIND_MAX, SESSION_ID_MAX
from artifacts_app.records import record_json
from artifacts_app.rest import serializers as s
from artifacts_app.rest.auth import request_caller
from artifacts_app.rest.content import content_response
from artifacts_app.rest.filters import ArtifactFilter, PageFilter, cleaned
from artifacts_app.rest.pagination import next_url
from artifacts_app.rest.parsers import (
    JSONOnlyNegotiation,
    JSONParser,
    LimitedUploadHandler,
    MultiPartParser,
    part_content_type,
)
from artifacts_app.rest.schema import CURSOR, JSON_BODY, LIMIT, PAGE, TAG, errors, query_text
from artifacts_app.values import json_loads

TAG_FIELDS = frozenset(
    {
        "kind",
        "key",
        "title",
        "data",
        "sessionId",
        "turnId",
        "source",
        "contents",
        "contentsBase64",
        "contentType",
    }
)
SESSION_FIELDS = frozenset({"id", "owner"})


def json_response(body: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(orjson.dumps(body), status=status, content_type="application/json")


def request_agent(auth: Any, slug: str) -> Agent:
    """The agent of the URL's slug. An agent key's agent came with the key (one statement,
    selectors.token_lookup): no second lookup of the slug."""
    key = getattr(auth, "key", None)
    if key is not None and key.agent_id is not None and key.agent.slug == slug:
        return key.agent
    return selectors.agent_get(slug)


class AgentView(APIView):
    """Base: resolves the agent from the URL's slug and the caller from the request."""

    parser_classes = [JSONParser]
    content_negotiation_class = JSONOnlyNegotiation

    def agent(self) -> Agent:
        return request_agent(self.request.auth, self.kwargs["slug"])

    def caller(self) -> access.Caller:
        return request_caller(self.request)

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # HttpResponse
        # API.md "Errors": OPTIONS is authenticated like GET (401 without credentials, 404 for
        # an unknown agent) and says only which methods the route has — never DRF's metadata
        # with the views' docstrings.
        access.artifact_visibility(self.caller(), self.agent())
        response = HttpResponse(status=204)
        response["Allow"] = ", ".join(self.allowed_methods)
        return response


def object_body(body: Any, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ArtifactError("invalid_body", "The body must be a JSON object.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ArtifactError(
            "unknown_field",
            f"Unknown field {unknown[0]!r}; the fields are {', '.join(sorted(allowed))}.",
            {"fields": unknown},
        )
    return body


class SessionsView(AgentView):
    """Sessions of the agent: list (all three callers) and create (agent key, user)."""

    @extend_schema(
        operation_id="sessions_list",
        summary="Sessions the caller may see, newest first",
        parameters=[LIMIT, CURSOR],
        responses={200: s.SessionPageSerializer, **errors(*PAGE)},
    )
    def get(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        visible = access.session_visibility(self.caller(), agent)
        query = cleaned(PageFilter, request.query_params)
        page = selectors.sessions_page(
            agent=agent, visible=visible, limit=query["limit"], cursor=query["cursor"]
        )
        return json_response(
            {
                "results": [selectors.session_json(row) for row in page.rows],
                "next": next_url(request, page.next_cursor),
            }
        )

    @extend_schema(
        operation_id="sessions_create",
        summary="Create a session (agent key: any owner or none; user: itself)",
        request=s.SessionCreateSerializer,
        responses={
            201: s.SessionSerializer,
            **errors(
                *JSON_BODY, "invalid_owner", "unknown_user", "invalid_session_id", "session_exists"
            ),
        },
    )
    def post(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        caller = self.caller()
        access.session_visibility(caller, agent)  # 401 / 403 before the body is looked at
        body = object_body(request.data, SESSION_FIELDS)
        owner = body.get("owner")
        if owner is not None and not isinstance(owner, str):
            raise ArtifactError(
                "invalid_owner", "`owner` is a username or null.", {"field": "owner"}
            )
        owner = access.require_session_create(caller, agent, owner)
        session = services.session_create(agent=agent, sid=body.get("id"), owner=owner)
        row = selectors.session_values(agent=agent, sid=session.sid)
        return json_response(selectors.session_json(row), status=201)


class SessionDetailView(AgentView):
    """One session, if the caller may see it (hidden looks missing: 404)."""

    @extend_schema(
        operation_id="sessions_get",
        summary="One session",
        responses={200: s.SessionSerializer, **errors("unknown_session")},
    )
    def get(self, request: Any, slug: str, session_id: str) -> HttpResponse:
        agent = self.agent()
        visible = access.session_visibility(self.caller(), agent)
        row = selectors.session_values(agent=agent, sid=session_id, visible=visible)
        return json_response(selectors.session_json(row))


def _contents(body: dict[str, Any]) -> bytes | str | None:
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


def _tag(agent: Agent, body: dict[str, Any], contents: Any, content_type: Any) -> Any:
    source = body.get("source")
    return services.artifact_tag(
        agent=agent,
        data=body.get("data"),
        kind=body.get("kind"),
        key=body.get("key"),
        title=body.get("title"),
        session_id=body.get("sessionId"),
        turn_id=body.get("turnId"),
        source="host" if source is None else source,
        contents=contents,
        content_type=content_type,
    )


def tag_json(agent: Agent, data: Any) -> HttpResponse:
    """A JSON tag's body (parsed) to its answer: the tag route's and its lean road's one way
    (``rest/lean.py``)."""
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
            LIMIT,
            CURSOR,
        ],
        responses={200: s.RecordPageSerializer, **errors(*PAGE, "unknown_session")},
    )
    def get(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        visible = access.artifact_visibility(self.caller(), agent)
        query = cleaned(ArtifactFilter, request.query_params)
        page = selectors.artifacts_page(
            agent=agent,
            visible=visible,
            kind=query["kind"],
            session_id=query["sessionId"],
            source=query["source"],
            key=query["key"],
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
    def post(self, request: Any, slug: str) -> HttpResponse:
        agent = self.agent()
        access.require_tag(self.caller(), agent)  # refuse before reading (or storing) a body
        request._request.upload_handlers = [LimitedUploadHandler(request._request)]
        if (request.content_type or "").lower().startswith("multipart/"):
            body, contents, content_type = self._multipart(request)
        else:
            return tag_json(agent, request.data)
        result = _tag(agent, body, contents, content_type)
        return json_response(result.record.to_json(), status=201 if result.created else 200)

    def _multipart(self, request: Any) -> tuple[dict[str, Any], Any, Any]:
        raw = request.data.get("record")
        if raw is None:
            raise ArtifactError(
                "record_required",
                "A multipart tag needs a `record` part holding the JSON record.",
                {"field": "record"},
            )
        body = json_loads(raw, what="The `record` part", field="record")
        body = object_body(body, TAG_FIELDS)
        upload = request.FILES.get("contents")
        if upload is None:
            contents: Any = _contents(body)
            return body, contents, body.get("contentType")
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
        return body, upload, content_type


class ArtifactDetailView(AgentView):
    """One record: read (all three callers) and delete (agent key, staff)."""

    @extend_schema(
        operation_id="artifacts_get",
        summary="One record",
        responses={200: s.RecordSerializer, **errors("unknown_artifact")},
    )
    def get(self, request: Any, slug: str, artifact_id: str) -> HttpResponse:
        agent = self.agent()
        visible = access.artifact_visibility(self.caller(), agent)
        row = selectors.artifact_values(agent=agent, artifact_id=artifact_id, visible=visible)
        return json_response(record_json(row))

    @extend_schema(
        operation_id="artifacts_delete",
        summary="Delete a record and its content (agent key, staff)",
        responses={204: None, **errors("unknown_artifact")},
    )
    def delete(self, request: Any, slug: str, artifact_id: str) -> HttpResponse:
        agent = self.agent()
        caller = self.caller()
        visible = access.artifact_visibility(caller, agent)
        selectors.artifact_values(agent=agent, artifact_id=artifact_id, visible=visible)
        access.require_delete(caller, agent)
        services.artifact_delete(agent=agent, artifact_id=artifact_id)
        return HttpResponse(status=204)


class ContentView(AgentView):
    """The record's content: streamed, with ETag, Range (206/416) and If-None-Match (304); and
    replaced with a raw body (``PUT``, agent key), streamed through sha256 into storage."""

    @extend_schema(
        operation_id="artifacts_content",
        summary="The record's blob, streamed; honours Range and If-None-Match",
        parameters=[
            OpenApiParameter(
                "Range", str, OpenApiParameter.HEADER, description="bytes=a-b, a- or -n"
            ),
            OpenApiParameter("If-None-Match", str, OpenApiParameter.HEADER),
        ],
        responses={
            (200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="The bytes."),
            (206, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="A range of the bytes."),
            304: OpenApiResponse(description="Not modified (ETag matched)."),
            **errors("unknown_artifact", "no_content", "range_not_satisfiable"),
        },
    )
    def get(self, request: Any, slug: str, artifact_id: str) -> Any:
        agent = self.agent()
        visible = access.artifact_visibility(self.caller(), agent)
        row = selectors.artifact_values(agent=agent, artifact_id=artifact_id, visible=visible)
        if not row["blob_id"]:
            raise NotFoundError(
                "no_content",
                f"Artifact {artifact_id!r} has no content; its record is all there is.",
            )
        return content_response(
            request,
            sha256=row["blob_id"],
            size=row["blob__size"],
            content_type=row["content_type"],
            filename=media.download_name(
                key=row["key"],
                title=row["title"],
                artifact_id=row["id"],
                content_type=row["content_type"],
            ),
        )

    @extend_schema(
        operation_id="artifacts_content_put",
        summary="Replace the record's content with the body (agent key); a re-tag of content only",
        request={"*/*": OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter(
                "Content-Type",
                {"type": "string", "maxLength": 255, "pattern": f"^{s.MEDIA_TYPE_HEADER_PATTERN}$"},
                OpenApiParameter.HEADER,
                required=True,
                description="The content's type (one media type, no comma).",
            ),
        ],
        responses={
            200: s.RecordSerializer,
            **errors(
                "content_type_required",
                "invalid_content_type",
                "content_too_large",
                "unknown_artifact",
            ),
        },
    )
    def put(self, request: Any, slug: str, artifact_id: str) -> HttpResponse:
        agent = self.agent()
        access.require_tag(self.caller(), agent)  # refuse before reading (or storing) a body
        content_type = request.META.get("CONTENT_TYPE", "").strip()
        if not content_type:
            raise ArtifactError(
                "content_type_required",
                "Send the content's type as the Content-Type header (e.g. text/markdown).",
                {"header": "Content-Type"},
            )
        limit = max_content_bytes()
        length = request.META.get("CONTENT_LENGTH")
        if length and str(length).isdigit() and int(length) > limit:
            raise content_too_large(limit)
        result = services.artifact_content_put(
            agent=agent,
            artifact_id=artifact_id,
            contents=cast(IO[bytes], _BodyReader(request._request)),  # read() is all blob_put uses
            content_type=content_type,
        )
        return json_response(result.record.to_json())


class _BodyReader:
    """The request body as a plain binary file for ``blobs.blob_put`` (read only, no seek)."""

    def __init__(self, request: Any) -> None:
        self._request = request

    def read(self, size: int = -1) -> bytes:
        return self._request.read(size)
