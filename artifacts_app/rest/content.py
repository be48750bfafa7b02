"""Serving a blob (API.md "Content", DESIGN.md §4): streamed from an async generator.

Under ASGI Django drains a *synchronous* iterator into memory before sending it; an async generator
is sent chunk by chunk. Each chunk is read on a worker thread, 1 MiB at a time so the hop is noise.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import IO

from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotModified,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase

from artifacts_app import media
from artifacts_app.blobs import blob_open, blob_redirect_url
from artifacts_app.records import DEFAULT_BYTES_TYPE

STREAM_CHUNK = 1024 * 1024
INLINE_SAFE = media.INLINE_SAFE
_RANGE_RE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class Unsatisfiable(Exception):
    pass


def is_inline_safe(content_type: str) -> bool:
    return media.is_inline_safe(content_type)


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The (start, end) inclusive of a single ``bytes=`` range; None: serve the whole blob.

    Malformed or multi-range headers are ignored (RFC 9110 allows it); a well-formed range that
    no byte satisfies raises ``Unsatisfiable`` (416).
    """
    if not header:
        return None
    match = _RANGE_RE.match(header)
    if match is None:
        return None
    # Past 18 digits a position is beyond any blob: clamp it rather than convert a 5,000-digit
    # number (Python refuses int() past 4,300 digits).
    first, last = (part if len(part) <= 18 else "9" * 18 for part in match.groups())
    if first == "" and last == "":
        return None
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise Unsatisfiable
        return max(size - suffix, 0), size - 1
    start = int(first)
    end = int(last) if last != "" else size - 1
    if last != "" and end < start:
        return None  # invalid: ignored
    if start >= size:
        raise Unsatisfiable
    return start, min(end, size - 1)


def etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    if header.strip() == "*":
        return True
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


class BlobBody:
    """A response's body: the blob's chunks (``blob_chunks``), and a ``close`` that Django calls
    with the response's own (a streamed content with ``close`` is closed with its response), so
    that the file is closed even when its chunks are never read."""

    def __init__(self, fh: IO[bytes], start: int, end: int) -> None:
        self.fh = fh
        self.start = start
        self.end = end

    def __aiter__(self) -> AsyncIterator[bytes]:
        return blob_chunks(self.fh, self.start, self.end)

    def close(self) -> None:
        self.fh.close()


async def blob_chunks(fh: IO[bytes], start: int, end: int) -> AsyncIterator[bytes]:
    """The bytes ``start``..``end`` (inclusive) of a blob opened at ``start`` (``blob_open``), one
    thread hop per chunk, never the whole blob."""
    try:
        remaining = end - start + 1
        while remaining > 0:
            chunk = await asyncio.to_thread(fh.read, min(STREAM_CHUNK, remaining))
            if not chunk:
                return
            remaining -= len(chunk)
            yield chunk
    finally:
        await asyncio.to_thread(fh.close)


def _common_headers(response: HttpResponseBase, etag: str) -> None:
    response["ETag"] = etag
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, no-cache"


def content_response(
    request: HttpRequest,
    *,
    sha256: str,
    size: int,
    content_type: str | None,
    filename: str = "download",
) -> HttpResponseBase:
    """The response for a blob: 200, 206, 304 or 416, with the headers API.md lists."""
    # A type stored before types were parsed, that is not exactly one media type, is served as
    # bytes to download: never handed to a browser to interpret.
    parsed = media.parse(content_type or "")
    content_type = str(parsed) if parsed is not None else DEFAULT_BYTES_TYPE
    etag = f'"{sha256}"'
    if etag_matches(request.META.get("HTTP_IF_NONE_MATCH"), etag):
        response: HttpResponseBase = HttpResponseNotModified()  # no body, so no Content-Type either
        _common_headers(response, etag)
        return response
    disposition = media.content_disposition(
        "inline" if is_inline_safe(content_type) else "attachment", filename
    )
    # ARTIFACTS_S3_REDIRECT (docs/operations.md): S3 serves the bytes, Range included, with the
    # record's headers; the URL is signed for GET only, so HEAD is answered here.
    redirect = (
        blob_redirect_url(sha256, content_type, disposition) if request.method == "GET" else None
    )
    if redirect is not None:
        response = HttpResponse(status=302)
        response["Location"] = redirect
        _common_headers(response, etag)
        return response
    range_header = request.META.get("HTTP_RANGE")
    if_range = request.META.get("HTTP_IF_RANGE")
    if if_range and if_range.strip() != etag:
        range_header = None  # the client's copy is stale: send it all
    try:
        wanted = parse_range(range_header, size)
    except Unsatisfiable:
        from artifacts_app.rest.errors import envelope, error_response

        response = error_response(
            416,
            envelope(
                "range_not_satisfiable",
                f"The content is {size} bytes; ask for a range that starts before byte {size}.",
                {"size": size},
            ),
        )
        response["Content-Range"] = f"bytes */{size}"
        _common_headers(response, etag)
        return response
    start, end = wanted if wanted is not None else (0, size - 1)
    length = end - start + 1 if size else 0
    send_bytes = length and request.method != "HEAD"  # HEAD: the headers only, no read
    # Opened here, before the status is sent: a storage that fails answers 503 (faults), not a
    # 200 whose body breaks off.
    fh = blob_open(sha256, start=start, end=end) if send_bytes else None
    response = StreamingHttpResponse(
        BlobBody(fh, start, end) if fh is not None else _empty(),
        status=206 if wanted is not None else 200,
        content_type=content_type,
    )
    response["Content-Length"] = str(length)
    if wanted is not None:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["Content-Disposition"] = disposition
    _common_headers(response, etag)
    if parsed is not None and parsed.essence == "application/pdf":
        # The admin and the playground show a PDF in an <iframe sandbox> of this route
        # (artifacts_app/previews.py): our own pages may frame it, no one else's.
        response["X-Frame-Options"] = "SAMEORIGIN"
    return response


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover - makes this an async generator
