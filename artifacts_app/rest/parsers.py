"""Request bodies: JSON read with a size cap and orjson; multipart with the file part streamed to disk.

Responses are rendered with orjson too; the client's ``Accept`` does not choose (JSON only).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import IO, Any

import orjson
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, QueryDict
from django.utils.datastructures import MultiValueDict
from rest_framework import parsers, renderers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from artifacts_app import media
from artifacts_app.blobs import BlobWriter
from artifacts_app.errors import ArtifactError, TooLargeError
from artifacts_app.jsontypes import JSON
from artifacts_app.rest import multipart
from artifacts_app.values import json_loads


def body_too_large(limit: int) -> TooLargeError:
    return TooLargeError(
        "body_too_large",
        f"The JSON body is larger than ARTIFACTS_MAX_JSON_BODY_BYTES ({limit} bytes); "
        "send large contents as multipart/form-data (a `record` part and a `contents` file part).",
        {"limit": limit},
    )


class JSONParser(parsers.BaseParser):
    """JSON bodies up to ``ARTIFACTS_MAX_JSON_BODY_BYTES``, parsed by the one parser (``values``)."""

    media_type = "application/json"

    def parse(
        self,
        stream: IO[bytes] | HttpRequest | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> JSON:
        limit = int(settings.ARTIFACTS_MAX_JSON_BODY_BYTES)
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if length and str(length).isdigit() and int(length) > limit:
            raise body_too_large(limit)
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise body_too_large(limit)
        return json_loads(raw, what="The body")


def malformed_multipart(reason: str, part: str | None = None) -> ArtifactError:
    return ArtifactError(
        "malformed_multipart",
        f"The multipart body could not be read: {reason}. Send multipart/form-data with a boundary "
        "parameter, a `record` part and an optional `contents` file part, ending with the closing "
        "boundary.",
        None if part is None else {"field": part},
    )


class MultiPartParser(parsers.BaseParser):
    """The tag's multipart body, read as it arrives (``rest/multipart.py``: the file part's bytes
    go to the upload handlers without a copy), with errors in the envelope and cut-off bodies
    refused. Its parts are ``PARTS``, each once: ``record`` (the JSON record, text in the request's
    charset, UTF-8 unless it names another) and ``contents`` (the blob, with or without a
    ``filename``); any other part is refused with 400 ``unknown_field``."""

    media_type = "multipart/form-data"
    PARTS = {"record": multipart.FIELD, "contents": multipart.FILE}

    def parse(
        self,
        stream: multipart.Readable,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> parsers.DataAndFiles[QueryDict, MultiValueDict[str, UploadedFile]]:
        context = parser_context or {}
        parsed = media.parse(media_type or "")
        boundary = parsed.param("boundary") if parsed is not None else None
        if not boundary or len(boundary) > 70:  # RFC 2046: 1–70 characters
            raise malformed_multipart("the Content-Type has no valid boundary parameter")
        # The door (DoorMiddleware) refused a charset that is not one of media.TEXT_ENCODINGS;
        # checked again here, where it becomes the codec of the parts.
        charset = context.get("encoding") or settings.DEFAULT_CHARSET
        encoding = media.text_encoding(charset)
        if encoding is None:
            raise media.charset_refusal(charset)
        request = context.get("request")
        handlers = list(getattr(request, "upload_handlers", ()))
        try:
            data, files = multipart.parse(
                stream, boundary.encode("latin-1"), handlers, encoding, self.PARTS
            )
        except BaseException as exc:
            # The body streams in as it is parsed: a client gone mid-file, a refusal or a malformed
            # part leaves a file part half-written.
            for handler in handlers:
                handler.upload_interrupted()
            if isinstance(exc, multipart.UnknownPart):
                raise ArtifactError(
                    "unknown_field",
                    f"Unknown multipart part {exc.part!r}; the parts are `record` (the JSON "
                    "record) and `contents` (the file).",
                    {"field": exc.part, "fields": [exc.part]},
                ) from None
            if isinstance(exc, multipart.MultipartError):
                raise malformed_multipart(str(exc), exc.part) from None
            raise
        return parsers.DataAndFiles(data, files)


def part_content_type(upload: UploadedFile) -> str | None:
    """A file part's ``Content-Type`` as the client sent it, as near as Django lets us see it.

    Django splits the header into the type and a dict of its parameters and keeps nothing else;
    ``text/plain;,text/html`` arrives as ``text/plain`` with a parameter named ``,text/html``. The
    type is rebuilt from both, so that ``media.canonical`` refuses what is not exactly one media
    type, as it does for a JSON ``contentType`` (API.md "Content"). A parameter named twice is the
    one thing lost: Django keeps its last value."""
    if not upload.content_type:
        return None
    parts = [upload.content_type]
    for name, raw in (upload.content_type_extra or {}).items():
        # Django hands some parameters over as bytes
        value = raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)
        quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(f"{name}={quoted}")
    return "; ".join(parts)


class HashedUpload(UploadedFile):
    """An uploaded file already hashed into blob storage's incoming area (``blob_writer``);
    ``blobs.blob_put`` moves it into place. Closed unfinished (a refused tag), it keeps nothing."""

    def __init__(
        self,
        writer: BlobWriter,
        name: str | None,
        content_type: str | None,
        charset: str | None,
        content_type_extra: dict[str, bytes] | None = None,
    ) -> None:
        super().__init__(io.BytesIO(), name, content_type, writer.size, charset, content_type_extra)
        self.blob_writer = writer

    def close(self) -> None:
        if self.blob_writer.stored is None:
            self.blob_writer.discard()
        super().close()


class LimitedUploadHandler(FileUploadHandler):
    """Streams a file part through sha256 into blob storage (``BlobWriter``) as it is parsed, and
    stops at ``ARTIFACTS_MAX_CONTENT_BYTES``: the bytes are written once, and nothing is kept of a
    refused one."""

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self._writer = BlobWriter()
        self._writers = [*getattr(self, "_writers", ()), self._writer]

    def receive_data_chunk(self, raw_data: bytes | memoryview, start: int) -> bytes | None:
        # A memoryview of what the parser read (rest/multipart.py): written as is, uncopied.
        self._writer.write(raw_data)  # past the limit: discards and raises content_too_large
        return None

    def file_complete(self, file_size: int) -> UploadedFile:
        return HashedUpload(
            self._writer,
            self.file_name,
            self.content_type,
            self.charset,
            self.content_type_extra,
        )

    def upload_interrupted(self) -> None:
        for writer in getattr(self, "_writers", ()):
            if writer.stored is None:
                writer.discard()


class ORJSONRenderer(renderers.BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None

    def render(
        self,
        data: JSON,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        return orjson.dumps(data)


class JSONOnlyNegotiation(BaseContentNegotiation):
    """The API speaks JSON only: no 406 for a browser's or a fuzzer's ``Accept``."""

    # ``request: Any``: DRF's request, or anything with its ``content_type`` (the tag route,
    # rest/lean.py, asks with Django's request, before it makes a DRF one or without one).
    def select_parser(self, request: Any, parsers: Iterable[BaseParser]) -> BaseParser | None:
        content_type = request.content_type or ""
        media = content_type.split(";")[0].strip().lower()
        for parser in parsers:
            if parser.media_type == media:
                return parser
        return None

    # ``renderers: Any``: DRF passes its list; the base types it as an Iterable, which has no [0].
    def select_renderer(
        self, request: Request, renderers: Any, format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        return (renderers[0], renderers[0].media_type)
