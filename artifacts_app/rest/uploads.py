"""Resumable uploads, ``/<slug>/v1/uploads`` (API.md "Large contents"): the tus 1.0.0 protocol's
core, ``creation``, ``creation-with-upload``, ``termination``, ``checksum`` and ``expiration``.

These views read tus's headers and answer with them; every rule is ``services.uploads``'. The
body of a PATCH (or a creation with upload) is the request's stream as it arrives (the site's
streamed body road, ``agent_site/server.py``), under ``ARTIFACTS_MAX_UPLOAD_BYTES`` at the door.
Uploads are the agent key's alone: anyone else is shown nothing (404), as for what does not exist.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import IO, Any, cast

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.http import http_date
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request

from artifacts_app import access, services
from artifacts_app.errors import (
    ArtifactError,
    NotFoundError,
    PreconditionFailedError,
    TooLargeError,
    UnsupportedMediaTypeError,
)
from artifacts_app.models import Agent
from artifacts_app.rest.schema import errors
from artifacts_app.rest.views.base import AgentView, chunked_body

TUS_VERSION = "1.0.0"
EXTENSIONS = "creation,creation-with-upload,termination,checksum,expiration"
OFFSET_TYPE = "application/offset+octet-stream"
METHODS_OVERRIDDEN = frozenset({"PATCH", "DELETE", "HEAD", "OPTIONS"})
_DIGITS_MAX = 19  # a byte count past this many digits is past any limit


def _number(request: HttpRequest, header: str, code: str) -> int | None:
    raw = request.headers.get(header)
    if raw is None:
        return None
    raw = raw.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > _DIGITS_MAX:
        raise ArtifactError(
            code,
            f"{header} is a number of bytes: digits only, 0 or more.",
            {"header": header},
        )
    return int(raw)


def parse_metadata(header: str | None) -> dict[str, str]:
    """``Upload-Metadata``: ``key base64value`` pairs split by commas; keys unique, without
    spaces or commas; values base64 of UTF-8 text (or left out: empty)."""
    found: dict[str, str] = {}
    if header is None or not header.strip():
        return found
    for pair in header.split(","):
        key, _, value = pair.strip().partition(" ")
        value = value.strip()
        if not key or not key.isascii() or " " in value or not key.isprintable():
            raise _bad_metadata("each pair is a key, a space and its value in base64")
        if key in found:
            raise _bad_metadata(f"the key {key[:64]!r} comes twice")
        try:
            text = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise _bad_metadata(f"the value of {key[:64]!r} is not base64 of UTF-8 text") from None
        if "\x00" in text:  # no database stores U+0000 in text (API.md "Errors")
            raise _bad_metadata(f"the value of {key[:64]!r} holds U+0000")
        found[key] = text
    return found


def _bad_metadata(why: str) -> ArtifactError:
    return ArtifactError(
        "invalid_upload_metadata",
        f"Upload-Metadata is not well-formed: {why} (`key base64value,key2 base64value`).",
        {"header": "Upload-Metadata"},
    )


def _metadata_header(metadata: dict[str, str]) -> str:
    return ",".join(
        f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in metadata.items()
    )


def _tus_headers(response: HttpResponseBase, state: services.UploadState | None) -> None:
    if state is not None:
        response["Upload-Offset"] = str(state.offset)
        if not state.finished:
            response["Upload-Expires"] = http_date(state.expires_at.timestamp())


class TusView(AgentView):
    """What both tus routes share: the agent key's alone, the version checked, the method that
    ``X-HTTP-Method-Override`` names, and tus's headers on every answer."""

    parser_classes: list[Any] = []

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        override = request.headers.get("X-HTTP-Method-Override", "").strip().upper()
        if request.method == "POST" and override in METHODS_OVERRIDDEN:
            request.method = override
        return super().dispatch(request, *args, **kwargs)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.uploader()  # who, before anything else (401, then 404 for anyone but the key)
        if request.method != "OPTIONS" and request.headers.get("Tus-Resumable") != TUS_VERSION:
            raise PreconditionFailedError(
                "tus_version",
                f"Send `Tus-Resumable: {TUS_VERSION}`: the server speaks tus {TUS_VERSION} only.",
                {"versions": [TUS_VERSION]},
            )

    def uploader(self) -> Agent:
        agent = self.agent()
        access.require_hidden(
            self.caller(),
            agent,
            access.Action.UPLOAD,
            NotFoundError(
                "unknown_route",
                f"There is no route {self.request.path!r}; see /api/docs/ for the routes under "
                "/<slug>/v1/.",
            ),
        )
        return agent

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Any:  # HttpResponse
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Tus-Resumable"] = TUS_VERSION
        if response.status_code == 412:
            response["Tus-Version"] = TUS_VERSION
        return response

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # HttpResponse
        response = HttpResponse(status=204)
        response["Tus-Version"] = TUS_VERSION
        response["Tus-Extension"] = EXTENSIONS
        response["Tus-Max-Size"] = str(services.uploads.max_upload_bytes())
        response["Tus-Checksum-Algorithm"] = ",".join(services.uploads.CHECKSUMS)
        response["Allow"] = ", ".join(self.allowed_methods)
        return response

    def _write(self, request: Request, agent: Agent, upload_id: str, offset: int) -> Any:
        content_type = (request.META.get("CONTENT_TYPE") or "").partition(";")[0].strip()
        length = _number(request, "Content-Length", "invalid_content_length")
        empty = not length and not chunked_body(request)
        if content_type.lower() != OFFSET_TYPE and not (empty and not content_type):
            # (A PATCH of no bytes needs no type: it only asks that the offset be this one.)
            raise UnsupportedMediaTypeError(
                "unsupported_media_type",
                f"An upload's bytes come as `Content-Type: {OFFSET_TYPE}`.",
                {"header": "Content-Type"},
            )
        checksum = services.parse_checksum(request.headers.get("Upload-Checksum"))
        stream = request.stream
        return services.upload_write(
            agent=agent,
            upload_id=upload_id,
            offset=offset,
            body=cast(IO[bytes], io.BytesIO() if stream is None else stream),
            length=length,
            checksum=checksum,
        )


HEADERS = [
    OpenApiParameter("Tus-Resumable", str, OpenApiParameter.HEADER, required=True, enum=["1.0.0"]),
]
BYTES = {"type": "integer", "minimum": 0, "maximum": 10**_DIGITS_MAX - 1}
CHECKSUM = OpenApiParameter(
    "Upload-Checksum",
    {"type": "string", "pattern": "^(sha256|sha1) [A-Za-z0-9+/]+={0,2}$"},
    OpenApiParameter.HEADER,
    description="`sha256` or `sha1`, a space, the body's digest in base64.",
)
METADATA = OpenApiParameter(
    "Upload-Metadata",
    str,
    OpenApiParameter.HEADER,
    description="`key base64value` pairs split by commas: `filename`, `contentType`.",
)
# Every refusal of a PATCH's bytes (and so of a creation with upload).
WRITE_ERRORS = (
    "unknown_upload",
    "upload_expired",
    "upload_lost",
    "offset_mismatch",
    "upload_locked",
    "upload_past_length",
    "checksum_mismatch",
    "unsupported_checksum",
    "invalid_checksum",
    "invalid_content_length",
    "unsupported_media_type",
    "body_incomplete",
    "body_timeout",
    "storage_full",
    "storage_unavailable",
    "tus_version",
)


class UploadsView(TusView):
    """``POST uploads``: make an upload (tus ``creation``), with its first bytes or not."""

    @extend_schema(
        operation_id="uploads_create",
        summary="Make a resumable upload (tus creation; agent key)",
        request={OFFSET_TYPE: OpenApiTypes.BINARY},
        parameters=[
            *HEADERS,
            OpenApiParameter("Upload-Length", BYTES, OpenApiParameter.HEADER, required=True),
            METADATA,
            CHECKSUM,
        ],
        responses={
            201: OpenApiResponse(description="Made; `Location` is its URL."),
            **errors(
                "invalid_upload_length",
                "upload_length_required",
                "upload_too_large",
                "invalid_upload_metadata",
                "invalid_content_type",
                *WRITE_ERRORS,
            ),
        },
    )
    def post(self, request: Request, slug: str) -> HttpResponse:
        agent = self.uploader()
        length = _number(request, "Upload-Length", "invalid_upload_length")
        if length is None:
            raise ArtifactError(
                "upload_length_required",
                "Send the upload's size as Upload-Length (deferred lengths are not taken).",
                {"header": "Upload-Length"},
            )
        sent = _number(request, "Content-Length", "invalid_content_length") or 0
        if sent > length:
            raise TooLargeError(
                "upload_past_length",
                f"The body ({sent} bytes) is longer than Upload-Length ({length}).",
                {"length": length},
            )
        metadata = parse_metadata(request.headers.get("Upload-Metadata"))
        state = services.upload_create(agent=agent, length=length, metadata=metadata)
        response = HttpResponse(status=201)
        response["Location"] = request.build_absolute_uri(f"/{slug}/v1/uploads/{state.id}")
        if sent or chunked_body(request):  # creation-with-upload: the first bytes come along
            state = self._write(request, agent, state.id, 0)
        _tus_headers(response, state)
        return response


class UploadView(TusView):
    """One upload: its offset (HEAD), its bytes (PATCH), its end (DELETE)."""

    @extend_schema(
        operation_id="uploads_offset",
        summary="An upload's offset: the bytes stored (tus HEAD)",
        parameters=HEADERS,
        responses={
            200: OpenApiResponse(description="`Upload-Offset`, `Upload-Length`."),
            **errors("unknown_upload", "upload_expired", "tus_version"),
        },
    )
    def head(self, request: Request, slug: str, upload_id: str) -> HttpResponse:
        state = services.upload_status(agent=self.uploader(), upload_id=upload_id)
        response = HttpResponse(status=200)
        response["Upload-Length"] = str(state.length)
        if state.metadata:
            response["Upload-Metadata"] = _metadata_header(state.metadata)
        response["Cache-Control"] = "no-store"
        _tus_headers(response, state)
        return response

    @extend_schema(
        operation_id="uploads_write",
        summary="Send bytes at the upload's offset (tus PATCH)",
        request={OFFSET_TYPE: OpenApiTypes.BINARY},
        parameters=[
            *HEADERS,
            OpenApiParameter("Upload-Offset", BYTES, OpenApiParameter.HEADER, required=True),
            CHECKSUM,
        ],
        responses={
            204: OpenApiResponse(description="Stored; `Upload-Offset` is the new offset."),
            **errors("invalid_upload_offset", *WRITE_ERRORS),
        },
    )
    def patch(self, request: Request, slug: str, upload_id: str) -> HttpResponse:
        agent = self.uploader()
        offset = _number(request, "Upload-Offset", "invalid_upload_offset")
        if offset is None:
            raise ArtifactError(
                "invalid_upload_offset",
                "Send Upload-Offset: the upload's offset (HEAD) the bytes start at.",
                {"header": "Upload-Offset"},
            )
        state = self._write(request, agent, upload_id, offset)
        response = HttpResponse(status=204)
        _tus_headers(response, state)
        return response

    @extend_schema(
        operation_id="uploads_delete",
        summary="End an upload and remove its bytes (tus termination)",
        parameters=HEADERS,
        responses={
            204: None,
            **errors("unknown_upload", "upload_expired", "upload_locked", "tus_version"),
        },
    )
    def delete(self, request: Request, slug: str, upload_id: str) -> HttpResponse:
        services.upload_delete(agent=self.uploader(), upload_id=upload_id)
        return HttpResponse(status=204)
