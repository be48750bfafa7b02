"""A record's content, ``/<slug>/v1/artifacts/<id>/content`` (API.md "HTTP routes"): streamed
out (``rest/content.py``) and replaced with a raw body."""

from __future__ import annotations

import io
from typing import IO, cast

from django.http import HttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request

from artifacts_app import access, media, selectors, services
from artifacts_app.blobs import content_too_large, max_content_bytes
from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.rest import serializers as s
from artifacts_app.rest.content import content_response
from artifacts_app.rest.schema import errors
from artifacts_app.rest.views.base import AgentView, json_response


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
    def get(self, request: Request, slug: str, artifact_id: str) -> HttpResponseBase:
        agent = self.agent()
        visible = access.visible(self.caller(), agent)
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
                description="The content's type (one media type, no comma); with `Upload-Id`, "
                "left out: the upload's metadata's.",
            ),
            OpenApiParameter(
                "Upload-Id",
                str,
                OpenApiParameter.HEADER,
                description="A finished resumable upload (POST uploads) as the content, "
                "instead of the body.",
            ),
        ],
        responses={
            200: s.RecordSerializer,
            **errors(
                "content_type_required",
                "invalid_content_type",
                "content_too_large",
                "body_incomplete",
                "body_timeout",
                "busy",
                "unknown_artifact",
                "invalid_upload",
                "upload_incomplete",
                "unknown_upload",
            ),
        },
    )
    def put(self, request: Request, slug: str, artifact_id: str) -> HttpResponse:
        agent = self.agent()
        access.require(self.caller(), agent, access.Action.TAG)  # before reading the body
        content_type = request.META.get("CONTENT_TYPE", "").strip()
        upload = request.headers.get("Upload-Id")
        if upload is not None:
            # A finished resumable upload instead of a body (API.md "Large contents").
            result = services.artifact_content_put(
                agent=agent,
                artifact_id=artifact_id,
                upload=upload.strip(),
                content_type=content_type or None,
            )
            return json_response(result.record.to_json())
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
        # DRF's stream: the request as it arrives (chunked too: ChunkedBodyRequest), None for an
        # empty body; read() is all blob_put uses.
        stream = request.stream
        result = services.artifact_content_put(
            agent=agent,
            artifact_id=artifact_id,
            contents=cast(IO[bytes], io.BytesIO() if stream is None else stream),
            content_type=content_type,
        )
        return json_response(result.record.to_json())
