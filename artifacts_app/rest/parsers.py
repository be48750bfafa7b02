"""Request bodies: JSON read with a size cap and orjson; multipart with the file part streamed to disk.

Responses are rendered with orjson too; the client's ``Accept`` does not choose (JSON only).
"""

from __future__ import annotations

from typing import IO, Any, cast

import orjson
from django.conf import settings
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from rest_framework import exceptions, parsers, renderers
from rest_framework.negotiation import BaseContentNegotiation

from artifacts_app import media
from artifacts_app.blobs import content_too_large, max_content_bytes
from artifacts_app.errors import ArtifactError, TooLargeError
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

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = int(settings.ARTIFACTS_MAX_JSON_BODY_BYTES)
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if length and str(length).isdigit() and int(length) > limit:
            raise body_too_large(limit)
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise body_too_large(limit)
        return json_loads(raw, what="The body")


class _ClosingWatch:
    """A stream wrapper that notes whether the multipart close delimiter (``--boundary--``) went by:
    Django's parser takes a body cut off mid-part as complete, and silently drops the cut part."""

    def __init__(self, stream: Any, boundary: bytes) -> None:
        self.stream = stream
        self.delimiter = b"--" + boundary + b"--"
        self.tail = b""
        self.closed_seen = False

    def read(self, *args: Any) -> bytes:
        chunk = self.stream.read(*args)
        if chunk and not self.closed_seen:
            window = self.tail + chunk
            self.closed_seen = self.delimiter in window
            self.tail = window[-len(self.delimiter) :]
        return chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def malformed_multipart(reason: str) -> ArtifactError:
    return ArtifactError(
        "malformed_multipart",
        f"The multipart body could not be read: {reason}. Send multipart/form-data with a boundary "
        "parameter, a `record` part and an optional `contents` file part, ending with the closing "
        "boundary.",
    )


class MultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser, with its errors in the envelope and cut-off bodies refused."""

    media_type = "multipart/form-data"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = media.parse(media_type or "")
        boundary = parsed.param("boundary") if parsed is not None else None
        if not boundary or len(boundary) > 70:  # RFC 2046: 1–70 characters
            raise malformed_multipart("the Content-Type has no valid boundary parameter")
        watched = _ClosingWatch(stream, boundary.encode("latin-1"))
        try:
            result = super().parse(cast(IO[Any], watched), media_type, parser_context)
        except exceptions.ParseError as exc:
            detail = str(exc.detail).removeprefix("Multipart form parse error - ")
            raise malformed_multipart(detail.rstrip(".")) from None
        if not watched.closed_seen:
            raise malformed_multipart("it ends before its closing boundary (was it cut off?)")
        return result


class LimitedUploadHandler(TemporaryFileUploadHandler):
    """Streams a file part to a temporary file, and stops at ``ARTIFACTS_MAX_CONTENT_BYTES``."""

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self._received = 0
        self._limit = max_content_bytes()

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self._received += len(raw_data)
        if self._received > self._limit:
            self.file.close()
            raise content_too_large(self._limit)
        return super().receive_data_chunk(raw_data, start)


class ORJSONRenderer(renderers.BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> bytes:
        if data is None:
            return b""
        return orjson.dumps(data)


class JSONOnlyNegotiation(BaseContentNegotiation):
    """The API speaks JSON only: no 406 for a browser's or a fuzzer's ``Accept``."""

    def select_parser(self, request: Any, parsers: Any) -> Any:
        content_type = request.content_type or ""
        media = content_type.split(";")[0].strip().lower()
        for parser in parsers:
            if parser.media_type == media:
                return parser
        return None

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return (renderers[0], renderers[0].media_type)
