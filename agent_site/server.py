"""Daphne's HTTP request, made fit for uploads: no form parsing, a body limit at the door, the
application started at the headers and the body streamed to it as it arrives.

Daphne's ``WebRequest`` is Twisted's ``Request``: Twisted parses every ``multipart/form-data`` POST
body whole, in memory, in pure Python (``_getMultiPartArgs``) before daphne hands the request on —
for a 64 MiB upload that was 78% of the time and ~775 MiB of memory, and the result is never used —
and daphne starts the application only once the whole body is in, then queues it at once. A body
kept on disk until then is written twice (once there, once into the blob). ``ArtifactsRequest``:

- turns Twisted's form parsing off (``_parsePOSTFormSubmission``);
- refuses a body past the site's limit as soon as it is passed — on ``Content-Length`` before any
  of the body is read, else while it arrives — with 413 and the API's error envelope, keeping none
  of it (what is still coming is read and dropped, so that the client gets its answer);
- keeps a small body (under ``STREAM_AT`` with a length) in memory and hands it on as daphne does;
- starts the application as soon as the headers of a larger (or chunked) body are in, and streams
  the body to it through a ``BodyStream`` with flow control: the socket is not read while more
  than ``HIGH_WATER`` bytes wait for the application, and is read again once it has taken them
  below ``LOW_WATER``. So the bytes go from the socket through sha256 into the blob's file once,
  in memory bounded by a constant, while the next ones arrive. The first ``http.request`` message
  carries, under ``BODY_STREAM``, an object whose ``take()`` answers the stream, to be read as a
  blocking binary file from the request's thread (``agent_site.asgi``'s handler makes it the
  request's body); an application that calls ``receive`` again instead gets the body in standard
  ``http.request`` messages;
- when the application answers before the body is all in (a refusal: 401, 413, 507 …), sends the
  answer at once, drops the rest of the body as it comes and ends the request when it is in (so
  the connection is kept for the next request), or closes the connection after ``LINGER_SECONDS``.

``install()`` makes daphne's server build its HTTP factory from here. ``agent_site/asgi.py`` calls
it when it is imported, so every daphne that serves this site — ``bin/run``, the tests' servers,
the benches, a plain ``daphne agent_site.asgi:application`` — gets it (daphne makes its factory in
``Server.run``, after it imported the application). ``tests/rest/test_uploads.py`` holds it there.
"""

from __future__ import annotations

import io
import re
from typing import Any, cast

import daphne.server
import orjson
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings
from twisted.web import http

from agent_site.body import (
    BodyStream,
    StreamedBody,
)

STREAM_AT = 100_000  # bytes: Twisted's own threshold between a body in memory and one on disk
LINGER_SECONDS = 10.0
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


class ArtifactsRequest(WebRequest):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stream: BodyStream | None = None
        self._refused = False
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False
        self._received = 0
        self._limit: int | None = None
        self._head = (b"", b"")
        self._all_in = False
        self._finish_waits: Any = None  # the linger's DelayedCall, once the answer waits

    # Twisted: headers are in; the body may follow.
    def gotLength(self, length: int | None) -> None:
        channel = self.channel
        self._head = (getattr(channel, "_command", b""), getattr(channel, "_path", b""))
        self._limit = body_limit(*self._head)
        self.content = io.BytesIO()
        if length is not None and length > self._limit:
            # No "100 Continue" for a body that is refused anyway (Twisted sends it after this).
            self.requestHeaders.removeHeader(b"Expect")
            self._refuse()
            return
        if (length is None or length >= STREAM_AT) and not self.requestHeaders.hasHeader(
            b"Upgrade"
        ):
            # Start the application now (daphne's process, through Twisted's requestReceived);
            # the body follows through the stream.
            self._stream = BodyStream(
                self._pause_reading,
                self._resume_reading,
                idle_seconds=float(settings.ARTIFACTS_BODY_IDLE_SECONDS),
            )
            version = getattr(channel, "_version", b"HTTP/1.1")
            http.Request.requestReceived(self, *self._head, version)

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._limit is not None and self._received > self._limit:
            self._refuse()
            return
        if self._stream is not None:
            self._stream.feed(data)
        else:
            self.content.write(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self._refused:
            # The client has sent it all and reads its 413 now.
            if self.channel is not None:
                self.channel.loseConnection()
            return
        if self._stream is not None:
            self._all_in = True
            self._stream.end()
            if self._finish_waits is not None:
                self._finish_waits.cancel()
                self._finish_waits = None
                self._finish()
            return
        super().requestReceived(command, path, version)

    def _pause_reading(self) -> None:
        transport = self.channel.transport if self.channel is not None else None
        if transport is not None and not self._all_in:
            transport.pauseProducing()

    def _resume_reading(self) -> None:
        transport = self.channel.transport if self.channel is not None else None
        if transport is not None and not self._all_in:
            transport.resumeProducing()

    def _refuse(self, response: bytes | None = None) -> None:
        """Answer now (413, or ``response``) and drop the body; nothing of it is kept."""
        self._refused = True
        if self._stream is not None:
            self._stream.fail()  # the application's reader stops; its answer is not sent
            self._stream.close()
        self.content = io.BytesIO()
        transport = self.channel.transport if self.channel is not None else None
        if transport is None:
            return
        if not self._response_started:
            if response is None:
                assert self._limit is not None
                response = _too_large_response(*self._head, self._limit)
            transport.write(response)
        self._resume_reading()
        # Read and drop what the client still sends, for a while, so that it reads the answer
        # instead of a reset; then close.
        from twisted.internet import reactor

        cast(Any, reactor).callLater(LINGER_SECONDS, self._close_connection)
        self.channel.persistent = False

    def _close_connection(self) -> None:
        if self.channel is not None:
            self.channel.loseConnection()

    def handle_reply(self, message: Any) -> None:
        if self._refused:
            return  # the door answered for the request already
        super().handle_reply(message)

    # Daphne: a streamed body is not read into the queue; the queue's deque serves it.
    @property
    def application_queue(self) -> Any:
        return self.__dict__.get("_application_queue")

    @application_queue.setter
    def application_queue(self, queue: Any) -> None:
        if queue is not None and self._stream is not None:
            queue._queue = StreamedBody(queue._queue, self._stream, queue)
            # Daphne's process stops before it reads the body into the queue.
            self.content = io.BytesIO()
            self.content.close()
        self.__dict__["_application_queue"] = queue

    def connectionLost(self, reason: Any) -> None:
        if self._stream is not None and not self._all_in:
            self._stream.fail()
        if self._finish_waits is not None:
            if self._finish_waits.active():
                self._finish_waits.cancel()
            self._finish_waits = None
        super().connectionLost(reason)

    def finish(self) -> None:
        if self._stream is not None and not self._all_in and not self._refused:
            # Answered before the body was in: the answer is out; the request ends (and the
            # connection takes the next one) once the rest of the body is in and dropped.
            if self._finish_waits is None:
                self._stream.close()
                from twisted.internet import reactor

                self._finish_waits = cast(Any, reactor).callLater(
                    LINGER_SECONDS, self._close_connection
                )
            return
        self._finish()

    def _finish(self) -> None:
        if self._stream is not None:
            self._stream.close()
        super().finish()


class ArtifactsHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = ArtifactsRequest
        return protocol


def install() -> None:
    """Make daphne's ``Server`` serve HTTP with ``ArtifactsRequest`` (idempotent)."""
    daphne.server.HTTPFactory = ArtifactsHTTPFactory
