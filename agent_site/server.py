"""Daphne's HTTP request, made fit for uploads: no form parsing, a body limit at the door, the body
handed to the application a chunk at a time.

Daphne's ``WebRequest`` is Twisted's ``Request``, and Twisted's ``requestReceived`` parses every
``multipart/form-data`` POST body whole, in memory, in pure Python (``_getMultiPartArgs`` →
``email.message_from_bytes``) before daphne hands the request on — for a 64 MiB upload that was 78%
of the time and ~775 MiB of memory, and the result is never used (daphne passes the raw body to the
application, which parses it again, streaming). Daphne then reads the whole body into its
application queue at once, so the body sits in memory a second time. ``ArtifactsRequest``:

- turns Twisted's form parsing off (``_parsePOSTFormSubmission``);
- spools bodies of 100 KB or more to an anonymous file under ``FILE_UPLOAD_TEMP_DIR`` (the data dir,
  not a tmpfs), as Twisted would in ``/tmp``;
- refuses a body past the site's limit as soon as it is passed — on ``Content-Length`` before any
  of the body is read, else while it arrives — with 413 and the API's error envelope, keeping none
  of it (what is still coming is read and dropped, so that the client gets its answer); a spool
  whose disk is full or read-only is refused the same way, with 507/503 (``artifacts_app.faults``);
- offers the spooled body to the application as the file itself: the first ``http.request``
  message is empty and carries, under ``BODY_FILE``, an object whose ``take()`` answers the file
  (``agent_site.asgi``'s handler makes it the request's body, so the bytes are not written to a
  second spool); an application that ignores the key gets the body in 1 MiB ``http.request``
  messages as it asks for them, instead of all at once (standard ASGI).

``install()`` makes daphne's server build its HTTP factory from here. ``agent_site/asgi.py`` calls
it when it is imported, so every daphne that serves this site — ``bin/run``, the tests' servers,
the benches, a plain ``daphne agent_site.asgi:application`` — gets it (daphne makes its factory in
``Server.run``, after it imported the application). ``tests/rest/test_uploads.py`` holds it there.
"""

from __future__ import annotations

import collections
import io
import re
import tempfile
from typing import Any, cast

import daphne.server
import orjson
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings

SPOOL_AT = 100_000  # bytes: Twisted's own threshold between memory and a file
FEED_CHUNK = 1024 * 1024
LINGER_SECONDS = 10.0
# The message key under which a spooled body is offered to the application as a file
# (``agent_site.asgi``'s handler takes it: the body is then not copied a second time).
BODY_FILE = "agent_site.body_file"
_CONTENT_PUT = re.compile(rb"^/[^/?]+/v1/artifacts/[^/?]+/content/?(?:\?.*)?$")


def body_limit(method: bytes, path: bytes) -> int:
    """The largest request body the site takes for this method and path (bytes).

    A raw content upload (``PUT …/artifacts/<id>/content``) is the content itself: the content
    limit. Anything else may be a multipart tag: the content limit plus its ``record`` part (at
    most a JSON body) and 1 MiB for the multipart framing. The exact limits are the application's
    (the JSON parser, the upload handler, the content view); this one keeps a body that no route
    could take from being read at all.
    """
    content = int(settings.ARTIFACTS_MAX_CONTENT_BYTES)
    if method.upper() == b"PUT" and _CONTENT_PUT.match(path):
        return content
    return content + int(settings.ARTIFACTS_MAX_JSON_BODY_BYTES) + 1024 * 1024


def _envelope_response(status: bytes, error: Any, extra: bytes = b"") -> bytes:
    body = orjson.dumps(error.as_envelope())
    return (
        b"HTTP/1.1 " + status + b"\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n"
        + extra
        + b"Connection: close\r\n\r\n"
    ) + body


def _spool_failed_response(exc: OSError) -> bytes:
    # The spool's disk is full or read-only (issue 14): the envelope, not a dropped connection.
    from artifacts_app import faults

    error = faults.storage_failure(exc)
    status = b"507 Insufficient Storage" if error.status == 507 else b"503 Service Unavailable"
    return _envelope_response(
        status, error, b"Retry-After: " + faults.retry_after(error).encode() + b"\r\n"
    )


def _too_large_response(method: bytes, path: bytes, limit: int) -> bytes:
    from artifacts_app.blobs import content_too_large, max_content_bytes
    from artifacts_app.errors import TooLargeError

    content = max_content_bytes()
    if limit == content:
        error = content_too_large(content)
    else:
        error = TooLargeError(
            "content_too_large",
            f"The request body is larger than any route takes ({limit} bytes: "
            f"ARTIFACTS_MAX_CONTENT_BYTES ({content}) for the contents, plus a `record` part); "
            "store a smaller blob, or raise the limit in the server's settings.",
            {"limit": content},
        )
    return _envelope_response(b"413 Request Entity Too Large", error)


class _SpooledBody(collections.deque):
    """The deque of daphne's application queue, serving the spooled body first.

    ``asyncio.Queue.get`` takes items with ``self._queue.popleft()`` once ``self._queue`` is
    non-empty; standing in for that deque, this one first offers the spooled file itself (an empty
    ``http.request`` whose ``BODY_FILE`` key is this deque: ``take()`` hands the file over), then,
    if nobody took it, answers the body from the file, 1 MiB per ``get``; then whatever daphne
    queued itself (its final empty ``http.request``, a disconnect). Only one chunk is in memory
    at a time, whatever the body's size.
    """

    def __init__(self, items: Any, body: Any) -> None:
        super().__init__(items)
        self._body = body
        self._offered = False

    def _more(self) -> bool:
        return self._body is not None

    def __len__(self) -> int:
        return super().__len__() + (1 if self._more() else 0)

    def __bool__(self) -> bool:
        return self._more() or super().__len__() > 0

    def popleft(self) -> Any:
        if self._body is not None:
            if not self._offered:
                self._offered = True
                return {"type": "http.request", "body": b"", "more_body": True, BODY_FILE: self}
            chunk = self._body.read(FEED_CHUNK)
            if chunk:
                return {"type": "http.request", "body": chunk, "more_body": True}
            self.close()
        return super().popleft()

    def take(self) -> Any:
        """The spooled body as a file at its start, now the caller's to read and close; the
        messages that follow are daphne's own (its final empty ``http.request``)."""
        body, self._body = self._body, None
        return body

    def close(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            body.close()


class ArtifactsRequest(WebRequest):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False
        self._received = 0
        self._limit: int | None = None
        self._head = (b"", b"")
        self._refused = False
        self._spooled: _SpooledBody | None = None

    # Twisted: headers are in; the body may follow.
    def gotLength(self, length: int | None) -> None:
        channel = self.channel
        self._head = (getattr(channel, "_command", b""), getattr(channel, "_path", b""))
        self._limit = body_limit(*self._head)
        content: Any = io.BytesIO()
        self.content = content
        if length is not None and length > self._limit:
            # No "100 Continue" for a body that is refused anyway (Twisted sends it after this).
            self.requestHeaders.removeHeader(b"Expect")
            self._refuse()
            return
        if length is None or length >= SPOOL_AT:
            try:
                self.content = tempfile.TemporaryFile(dir=settings.FILE_UPLOAD_TEMP_DIR)
            except OSError as exc:
                self.requestHeaders.removeHeader(b"Expect")
                self._refuse(_spool_failed_response(exc))

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._limit is not None and self._received > self._limit:
            self._refuse()
            return
        try:
            self.content.write(data)
        except OSError as exc:
            self._refuse(_spool_failed_response(exc))

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self._refused:
            # The client has sent it all and reads its 413 now.
            if self.channel is not None:
                self.channel.loseConnection()
            return
        super().requestReceived(command, path, version)

    def _refuse(self, response: bytes | None = None) -> None:
        """Answer now (413, or ``response``) and drop the body; nothing of it is kept."""
        self._refused = True
        try:
            self.content.close()
        except OSError:
            pass  # a spool on a full disk may fail to flush: it is dropped anyway
        self.content = io.BytesIO()
        transport = self.channel.transport if self.channel is not None else None
        if transport is None:
            return
        if response is None:
            assert self._limit is not None
            response = _too_large_response(*self._head, self._limit)
        transport.write(response)
        # Read and drop what the client still sends, for a while, so that it reads the answer
        # instead of a reset; then close.
        from twisted.internet import reactor

        cast(Any, reactor).callLater(LINGER_SECONDS, self._close_refused)
        self.channel.persistent = False

    def _close_refused(self) -> None:
        if self.channel is not None:
            self.channel.loseConnection()

    # Daphne: swap the spooled body for an empty one before daphne reads it into its queue, and
    # serve it from the queue's deque as the application asks.
    def process(self) -> Any:
        if self._refused:
            return None
        if not isinstance(self.content, io.BytesIO) and not self.requestHeaders.hasHeader(
            b"Upgrade"
        ):
            self.content.seek(0)
            self._body_file, self.content = self.content, io.BytesIO()
        return super().process()

    @property
    def application_queue(self) -> Any:
        return self.__dict__.get("_application_queue")

    @application_queue.setter
    def application_queue(self, queue: Any) -> None:
        body = self.__dict__.pop("_body_file", None)
        if queue is not None and body is not None:
            self._spooled = _SpooledBody(queue._queue, body)
            queue._queue = self._spooled
        elif body is not None:
            body.close()
        self.__dict__["_application_queue"] = queue

    def connectionLost(self, reason: Any) -> None:
        self._release()
        super().connectionLost(reason)

    def finish(self) -> None:
        self._release()
        super().finish()

    def _release(self) -> None:
        if self._spooled is not None:
            self._spooled.close()
        body = self.__dict__.pop("_body_file", None)
        if body is not None:
            body.close()


class ArtifactsHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = ArtifactsRequest
        return protocol


def install() -> None:
    """Make daphne's ``Server`` serve HTTP with ``ArtifactsRequest`` (idempotent)."""
    daphne.server.HTTPFactory = ArtifactsHTTPFactory
