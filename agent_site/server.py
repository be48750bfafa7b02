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
  the connection is kept for the next request), or closes the connection after ``LINGER_SECONDS``;
- takes every body that way, whatever its headers: an ``Upgrade`` header does not turn streaming
  off (a body was then held whole, before authentication); a websocket handshake with a body is
  refused with 400 (a real one is a GET without a body);
- bounds a body in time and in number: ``ARTIFACTS_BODY_DEADLINE_SECONDS`` from the end of the
  headers to the body's last byte, streamed or small (past it, 408 ``body_timeout``, however
  steadily the bytes trickle), and ``ARTIFACTS_MAX_BODY_STREAMS`` bodies streaming at once per
  process (each holds a request thread; past it, 503 ``busy`` with ``Retry-After``, the body
  unread). A small body holds no thread while it arrives (the application starts once it is in);
- gives the stream ``body.release_connections``: before the view's read waits for bytes, its
  thread's database connections are closed (authentication opened one), so that slow clients do
  not hold PostgreSQL's connections.

``ArtifactsHTTPChannel`` answers what Twisted's parser refuses with the API's envelope instead of a
bare 400 or a closed connection: a request line past 16 KiB 414 ``uri_too_long``, a header block
past 16 KiB 431 ``headers_too_large``, a malformed request 400 ``malformed_request`` — and so is a
second ``Transfer-Encoding`` header, or one that is not ``chunked`` (Twisted took ``chunked`` plus
``identity`` as chunked; a proxy that honours the last one would frame the body otherwise). The
connection is then half-closed (the client reads the answer, not a reset) and what still comes is
dropped until it closes, for at most ``LINGER_SECONDS``.

``install()`` makes daphne's server build its HTTP factory from here. ``agent_site/asgi.py`` calls
it when it is imported, so every daphne that serves this site — ``bin/run``, the tests' servers,
the benches, a plain ``daphne agent_site.asgi:application`` — gets it (daphne makes its factory in
``Server.run``, after it imported the application). ``tests/rest/test_uploads.py`` holds it there.

Private names of other libraries used here (no public door offers what they do):
- Twisted: ``Request._parsePOSTFormSubmission`` (form parsing off); ``HTTPChannel._command``,
  ``_path``, ``_version`` (the request line, read at the headers); ``HTTPChannel.
  _respondToBadRequestAndDisconnect`` (overridden: the envelope); ``http.
  _GenericHTTPChannelProtocol`` (the factory's wrapper, built around our channel).
- daphne: ``WebRequest._response_started``.
- asyncio (``agent_site/body.py``): ``Queue._queue``, ``Queue._wakeup_next``, ``Queue._getters``.
"""

from __future__ import annotations

import io
import re
from typing import Any, cast

import daphne.server
import orjson
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings
from twisted.internet.protocol import connectionDone
from twisted.web import http

from agent_site.body import (
    BodyStream,
    StreamedBody,
    release_connections,
)

STREAM_AT = 100_000  # bytes: Twisted's own threshold between a body in memory and one on disk
LINGER_SECONDS = 10.0
BUSY_RETRY_AFTER = 5  # seconds: the Retry-After of a 503 `busy`
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


def _busy_response() -> bytes:
    from artifacts_app.errors import UnavailableError

    streams = int(settings.ARTIFACTS_MAX_BODY_STREAMS)
    error = UnavailableError(
        "busy",
        f"The server is receiving as many request bodies as it takes at once ({streams}: "
        f"ARTIFACTS_MAX_BODY_STREAMS); send the request again after {BUSY_RETRY_AFTER} s.",
        {"streams": streams},
    )
    return _envelope_response(
        b"503 Service Unavailable", error, b"Retry-After: %d\r\n" % BUSY_RETRY_AFTER
    )


def _deadline_response() -> bytes:
    from artifacts_app.errors import StalledError

    seconds = int(settings.ARTIFACTS_BODY_DEADLINE_SECONDS)
    error = StalledError(
        "body_timeout",
        f"The request body was not whole {seconds} s after its headers "
        "(ARTIFACTS_BODY_DEADLINE_SECONDS), so the server stopped reading it. Send the whole body "
        "again, faster, or in smaller pieces.",
        {"seconds": seconds},
    )
    return _envelope_response(b"408 Request Timeout", error)


def malformed_request(message: str) -> Any:
    from artifacts_app.errors import ArtifactError

    return ArtifactError("malformed_request", message)


def _head_too_large() -> tuple[bytes, Any]:
    from artifacts_app.errors import ArtifactError

    limit = http.HTTPChannel.totalHeadersSize
    error = ArtifactError(
        "headers_too_large",
        f"The request's header block is larger than the server takes ({limit} bytes, the request "
        "line included); send fewer or shorter headers.",
        {"limit": limit},
    )
    return b"431 Request Header Fields Too Large", error


def _uri_too_long() -> tuple[bytes, Any]:
    from artifacts_app.errors import ArtifactError

    limit = http.HTTPChannel.MAX_LENGTH
    error = ArtifactError(
        "uri_too_long",
        f"The request line is longer than the server takes ({limit} bytes); send a shorter "
        "path and query.",
        {"limit": limit},
    )
    return b"414 URI Too Long", error


class ArtifactsRequest(WebRequest):
    # Bodies streaming now, in this process (read and written on the reactor's thread only).
    streaming = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stream: BodyStream | None = None
        self._refused = False
        self._slot = False  # whether this request counts in ``streaming``
        self._deadline: Any = None  # the body deadline's DelayedCall
        super().__init__(*args, **kwargs)
        self._parsePOSTFormSubmission = False
        self._received = 0
        self._limit: int | None = None
        self._head = (b"", b"")
        self._all_in = False
        self._finish_waits: Any = None  # the linger's DelayedCall, once the answer waits

    # Twisted: headers are in; the body may follow (length None: chunked).
    def gotLength(self, length: int | None) -> None:
        channel = self.channel
        self._head = (getattr(channel, "_command", b""), getattr(channel, "_path", b""))
        self._limit = body_limit(*self._head)
        self.content = io.BytesIO()
        if length == 0:
            return
        upgrade = self.requestHeaders.getRawHeaders(b"Upgrade")
        if upgrade and upgrade[0].lower() == b"websocket":
            # Daphne hands such a request to the websocket protocol, body and all, once the body
            # is in: a handshake is a GET without a body, so one with a body is refused unread.
            self._refuse_at_headers(
                _envelope_response(
                    b"400 Bad Request",
                    malformed_request("A websocket handshake carries no request body."),
                )
            )
            return
        if length is not None and length > self._limit:
            self._refuse_at_headers()
            return
        if length is None or length >= STREAM_AT:
            if ArtifactsRequest.streaming >= int(settings.ARTIFACTS_MAX_BODY_STREAMS):
                self._refuse_at_headers(_busy_response())
                return
            ArtifactsRequest.streaming += 1
            self._slot = True
        self._deadline = _reactor().callLater(
            float(settings.ARTIFACTS_BODY_DEADLINE_SECONDS), self._deadline_passed
        )
        if self._slot:
            # Start the application now (daphne's process, through Twisted's requestReceived);
            # the body follows through the stream.
            self._stream = BodyStream(
                self._pause_reading,
                self._resume_reading,
                idle_seconds=float(settings.ARTIFACTS_BODY_IDLE_SECONDS),
                release=release_connections,
            )
            version = getattr(channel, "_version", b"HTTP/1.1")
            http.Request.requestReceived(self, *self._head, version)

    def _refuse_at_headers(self, response: bytes | None = None) -> None:
        # No "100 Continue" for a body that is refused anyway (Twisted sends it after this).
        self.requestHeaders.removeHeader(b"Expect")
        self._refuse(response)

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
            # The client has sent it all and reads its answer now.
            if self.channel is not None:
                self.channel.loseConnection()
            return
        self._all_in = True
        self._settle()
        if self._stream is not None:
            self._stream.end()
            if self._finish_waits is not None:
                self._finish_waits.cancel()
                self._finish_waits = None
                self._finish()
            return
        super().requestReceived(command, path, version)

    def _settle(self) -> None:
        """The body no longer streams (in, refused, abandoned or gone): its slot and its
        deadline are given back."""
        if self._slot:
            self._slot = False
            ArtifactsRequest.streaming -= 1
        if self._deadline is not None:
            if self._deadline.active():
                self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        if not self._all_in and not self._refused:
            self._refuse(_deadline_response())

    def _pause_reading(self) -> None:
        transport = self.channel.transport if self.channel is not None else None
        if transport is not None and not self._all_in:
            transport.pauseProducing()

    def _resume_reading(self) -> None:
        transport = self.channel.transport if self.channel is not None else None
        if transport is not None and not self._all_in:
            transport.resumeProducing()

    def abandon(self) -> bool:
        """The channel refuses the connection (a framing error mid-body): the body will not be
        whole and the application's answer is not sent. Answers whether an answer had begun."""
        started = bool(self._response_started)
        self._refused = True
        self._settle()
        if self._stream is not None:
            self._stream.fail()
            self._stream.close()
        return started

    def _refuse(self, response: bytes | None = None) -> None:
        """Answer now (413, or ``response``) and drop the body; nothing of it is kept."""
        self._refused = True
        self._settle()
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
            lose_write = getattr(transport, "loseWriteConnection", None)
            if lose_write is not None:
                lose_write()  # the client reads the answer and its end, while it still sends
        self._resume_reading()
        # Read and drop what the client still sends, for a while, so that it reads the answer
        # instead of a reset; then close.
        _reactor().callLater(LINGER_SECONDS, self._close_connection)
        self.channel.persistent = False

    def _close_connection(self) -> None:
        if self.channel is not None:
            self.channel.loseConnection()

    def handle_reply(self, message: Any) -> None:
        if self._refused:
            return  # the door answered for the request already
        super().handle_reply(message)

    def basic_error(self, status: int, status_text: bytes, body: str) -> None:
        """Daphne's own refusals of a request (a bad header name or value, a path or query that
        is not ASCII): the envelope instead of daphne's HTML page."""
        if status != 400:
            super().basic_error(status, status_text, body)
            return
        payload = orjson.dumps(malformed_request(f"{body}.").as_envelope())
        headers = [(b"Content-Type", b"application/json")]
        self.handle_reply({"type": "http.response.start", "status": 400, "headers": headers})
        self.handle_reply({"type": "http.response.body", "body": payload})

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
        self._settle()
        if self._finish_waits is not None:
            if self._finish_waits.active():
                self._finish_waits.cancel()
            self._finish_waits = None
        super().connectionLost(reason)

    def finish(self) -> None:
        if self._stream is not None and not self._all_in and not self._refused:
            # Answered before the body was in: the answer is out; the request ends (and the
            # connection takes the next one) once the rest of the body is in and dropped. The
            # application is done with the body: it no longer counts as streaming.
            if self._finish_waits is None:
                self._stream.close()
                self._settle()
                self._finish_waits = _reactor().callLater(LINGER_SECONDS, self._close_connection)
            return
        self._finish()

    def _finish(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._settle()
        super().finish()


class ArtifactsHTTPChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel, answering what its parser refuses with the API's envelope
    (see the module's docstring) and refusing an ambiguous ``Transfer-Encoding``."""

    def __init__(self) -> None:
        super().__init__()
        self._at_request_line = True
        self._head_size = 0  # bytes of the request line and headers so far (Twisted's count)
        self._encodings = 0  # Transfer-Encoding headers of this request
        self._closing: Any = None  # the DelayedCall that closes a refused connection

    def dataReceived(self, data: bytes) -> None:
        if self._closing is not None:
            return  # refused: what the client still sends is dropped
        super().dataReceived(data)

    def rawDataReceived(self, data: bytes) -> None:
        if self._closing is not None:
            return
        super().rawDataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if self._closing is not None:
            return
        if self._at_request_line and line:
            self._at_request_line = False
            self._head_size = 0
            self._encodings = 0
        self._head_size += len(line)
        if self._head_size > self.totalHeadersSize:
            self.refuse(*_head_too_large())
            return
        super().lineReceived(line)

    def headerReceived(self, line: bytes) -> bool:
        if self._closing is not None:
            return False
        name, colon, value = line.partition(b":")
        if colon and name.lower() == b"transfer-encoding":
            self._encodings += 1
            if self._encodings > 1 or value.strip(b" \t").lower() != b"chunked":
                # RFC 9112 §6.1: a body's framing must be unambiguous; only `chunked` is taken.
                self.refuse(
                    b"400 Bad Request",
                    malformed_request(
                        "A request body's Transfer-Encoding must be one header, `chunked`, or "
                        "none (with a Content-Length)."
                    ),
                )
                return False
        return bool(super().headerReceived(line))

    def lineLengthExceeded(self, line: bytes) -> None:
        self.refuse(*(_uri_too_long() if self._at_request_line else _head_too_large()))

    def allContentReceived(self) -> None:
        self._at_request_line = True
        super().allContentReceived()

    def _respondToBadRequestAndDisconnect(self) -> None:
        self.refuse(
            b"400 Bad Request",
            malformed_request(
                "The request is not well-formed HTTP/1.1 (its request line, a header, the "
                "Content-Length or the chunked framing of its body)."
            ),
        )

    def refuse(self, status: bytes, error: Any) -> None:
        """Answer ``status`` with ``error``'s envelope, unless an answer has begun, and end the
        connection: half-closed at once (the client reads the answer and its end), what still
        comes dropped, closed when the client closes or after ``LINGER_SECONDS``."""
        if self._closing is not None:
            return
        request = self.requests[-1] if self.requests else None
        started = request.abandon() if isinstance(request, ArtifactsRequest) else False
        self.persistent = False
        self._closing = _reactor().callLater(LINGER_SECONDS, self._close_now)
        transport = cast(Any, self.transport)
        if transport is None:
            return
        if not started:
            transport.write(_envelope_response(status, error))
        lose_write = getattr(transport, "loseWriteConnection", None)  # TCP and TLS have it
        if lose_write is not None:
            lose_write()
        else:
            self.loseConnection()

    def _close_now(self) -> None:
        if self.transport is not None:
            self.transport.abortConnection()

    def connectionLost(self, reason: Any = connectionDone) -> None:
        if self._closing is not None and self._closing.active():
            self._closing.cancel()
        super().connectionLost(reason)


class ArtifactsHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = ArtifactsRequest
        return protocol

    @staticmethod
    def protocol() -> Any:
        # Twisted's factory makes its generic wrapper (HTTP/1.1, or HTTP/2 if TLS negotiates it)
        # around a plain HTTPChannel; ours wraps this site's channel.
        return http._GenericHTTPChannelProtocol(ArtifactsHTTPChannel())


def _reactor() -> Any:
    from twisted.internet import reactor

    return cast(Any, reactor)


def install() -> None:
    """Make daphne's ``Server`` serve HTTP with ``ArtifactsRequest`` (idempotent)."""
    daphne.server.HTTPFactory = ArtifactsHTTPFactory
