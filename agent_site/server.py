"""Daphne's HTTP request, made fit for uploads and downloads: no form parsing, a body limit at the
door, the application started at the headers and the body streamed to it as it arrives, a
streamed response paced by the client.

Daphne's ``WebRequest`` is Twisted's ``Request``: Twisted parses every ``multipart/form-data`` POST
body whole, in memory, in pure Python, before daphne hands the request on —
for a 64 MiB upload that was 78% of the time and ~775 MiB of memory, and the result is never used —
and daphne starts the application only once the whole body is in, then queues it at once. A body
kept on disk until then is written twice (once there, once into the blob). ``ArtifactsRequest``:

- turns Twisted's form parsing off;
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
  ``http.request`` messages (``BodyFlow``);
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

``BodyFlow`` is the ASGI half, around the whole HTTP application: it hands a streamed body to an
application that calls ``receive`` again instead of taking the stream (in ``http.request``
messages, as it arrives), and paces a streamed response: after each chunk it waits while the
connection's send buffer is full and ``SEND_AHEAD`` bytes have been handed over since it filled.
Twisted tells when: ``SendGate`` is registered with the request as its push producer, which
Twisted pauses past the transport's buffer and resumes once the buffer is sent.

``install()`` makes daphne's server build its HTTP factory from here. ``agent_site/asgi.py`` calls
it when it is imported, so every daphne that serves this site — ``bin/run``, the tests' servers,
the benches, a plain ``daphne agent_site.asgi:application`` — gets it (daphne makes its factory in
``Server.run``, after it imported the application). ``tests/rest/test_uploads.py`` holds it there.

Other libraries, through their public doors where they have one: Twisted's
``Request(parsePOSTFormSubmission=False)`` (no form parsing), ``HTTPFactory.protocol`` (the channel
class, plain: the site speaks HTTP/1.1 only), ``ITransport.pauseProducing``/``resumeProducing``
(reading a body with flow control), ``IConsumer.registerProducer`` (pacing a response); asyncio's
``Event`` and the context a task inherits. The request line is read by the channel as it arrives.
What has no public door is in one adapter per library, each listing what it touches and pinned to
its release by a test (``tests/adapters/``): ``agent_site/adapters/twisted.py`` (the parser's
refusal, ``HTTPChannel._respondToBadRequestAndDisconnect``) and ``agent_site/adapters/daphne.py``
(the factory daphne builds, the moment it starts the application, keeping a streamed body out of
its queue, the request an application serves).
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import orjson
from daphne.http_protocol import HTTPFactory
from django.conf import settings
from twisted.internet.protocol import connectionDone
from twisted.web import http

from agent_site.adapters import daphne as daphne_adapter
from agent_site.adapters import twisted as twisted_adapter
from agent_site.body import (
    BodyStream,
    Message,
    StreamedMessages,
    release_connections,
)

if TYPE_CHECKING:
    from twisted.internet.base import DelayedCall
    from twisted.internet.interfaces import IAddress
    from twisted.python.failure import Failure

    from artifacts_app.errors import ArtifactError

STREAM_AT = 100_000  # bytes: Twisted's own threshold between a body in memory and one on disk
LINGER_SECONDS = 10.0
BUSY_RETRY_AFTER = 5  # seconds: the Retry-After of a 503 `busy`
# A streamed response's bytes handed to Twisted past its full send buffer before the sender waits.
SEND_AHEAD = 2 * 1024 * 1024
_CONTENT_PUT = re.compile(rb"^/[^/?]+/v1/artifacts/[^/?]+/content/?(?:\?.*)?$")
_UPLOADS = re.compile(rb"^/[^/?]+/v1/uploads(?:/[^/?]+)?/?(?:\?.*)?$")


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
    if method.upper() in (b"PATCH", b"POST") and _UPLOADS.match(path):
        # A resumable upload's bytes (tus): at most the upload's length, itself under this.
        return int(settings.ARTIFACTS_MAX_UPLOAD_BYTES)
    return content + int(settings.ARTIFACTS_MAX_JSON_BODY_BYTES) + 1024 * 1024


def _envelope_response(status: bytes, error: ArtifactError, extra: bytes = b"") -> bytes:
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


def malformed_request(message: str) -> ArtifactError:
    from artifacts_app.errors import ArtifactError

    return ArtifactError("malformed_request", message)


def _head_too_large() -> tuple[bytes, ArtifactError]:
    from artifacts_app.errors import ArtifactError

    limit = http.HTTPChannel.totalHeadersSize
    error = ArtifactError(
        "headers_too_large",
        f"The request's header block is larger than the server takes ({limit} bytes, the request "
        "line included); send fewer or shorter headers.",
        {"limit": limit},
    )
    return b"431 Request Header Fields Too Large", error


def _uri_too_long() -> tuple[bytes, ArtifactError]:
    from artifacts_app.errors import ArtifactError

    limit = http.HTTPChannel.MAX_LENGTH
    error = ArtifactError(
        "uri_too_long",
        f"The request line is longer than the server takes ({limit} bytes); send a shorter "
        "path and query.",
        {"limit": limit},
    )
    return b"414 URI Too Long", error


class SendGate:
    """A streamed response's pace: registered as the request's push producer (Twisted's
    ``IPushProducer``), so that Twisted pauses it while the connection's send buffer is full
    (past 64 KiB) and resumes it once the buffer is all sent (``IConsumer.registerProducer``).
    ``BodyFlow`` reports each body chunk it sent: past the pause the sender may go on for
    ``SEND_AHEAD`` bytes before it waits, so that the socket has the next bytes at hand when the
    buffer empties (waiting at 64 KiB halved a download's throughput). Called on the reactor's
    thread, which is the event loop's (daphne runs Twisted on asyncio)."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._ahead = 0  # bytes sent since Twisted paused the gate

    def pauseProducing(self) -> None:
        self._open.clear()

    def resumeProducing(self) -> None:
        self._ahead = 0
        self._open.set()

    def stopProducing(self) -> None:
        # The connection is gone: the sender stops waiting (its sends are dropped).
        self.resumeProducing()

    async def sent(self, size: int) -> None:
        """``size`` bytes were handed to Twisted: wait while they are too far ahead of the client."""
        if self._open.is_set():
            return
        self._ahead += size
        if self._ahead > SEND_AHEAD:
            await self._open.wait()


class ArtifactsRequest(daphne_adapter.Request):
    # Bodies streaming now, in this process (read and written on the reactor's thread only).
    streaming = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stream: BodyStream | None = None
        self._refused = False
        self._slot = False  # whether this request counts in ``streaming``
        self._deadline: DelayedCall | None = None  # the body deadline
        self._answering = False  # whether the answer's status line has gone out
        self._gate: SendGate | None = None
        # No form parsing: Twisted would parse a multipart body whole, in memory, for nothing.
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)
        self._received = 0
        self._limit: int | None = None
        self._head = (b"", b"")
        self._all_in = False
        self._finish_waits: DelayedCall | None = None  # the linger, once the answer waits

    # Twisted: headers are in; the body may follow (length None: chunked).
    def gotLength(self, length: int | None) -> None:
        channel = self.channel
        method, path, version = getattr(channel, "request_line", (b"", b"", b"HTTP/1.1"))
        self._head = (method, path)
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
            # In an empty context: resuming registers the socket's reader with the event loop,
            # which keeps the context it is registered in, and every later request on this
            # kept-alive connection (a websocket handshake's application task included) would
            # start in this one's — after its ``ThreadSensitiveContext`` has exited.
            contextvars.Context().run(transport.resumeProducing)

    def abandon(self) -> bool:
        """The channel refuses the connection (a framing error mid-body): the body will not be
        whole and the application's answer is not sent. Answers whether an answer had begun."""
        started = self._answering
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
        if not self._answering:
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

    def handle_reply(self, message: Message) -> None:
        if self._refused:
            return  # the door answered for the request already
        if message.get("type") == "http.response.start" and not self.finished:
            self._answering = self.channel is not None
        super().handle_reply(message)

    def send_gate(self) -> SendGate:
        """The pace of this request's streamed response (registered with Twisted at first use)."""
        if self._gate is None:
            self._gate = SendGate()
            if self.channel is not None and not self.finished:
                self.registerProducer(self._gate, True)
        return self._gate

    def _let_go_of_the_gate(self) -> None:
        if self._gate is not None:
            if self.producer is not None and self.channel is not None:
                self.unregisterProducer()
            self._gate.stopProducing()

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

    def streams_body(self) -> bool:
        # Daphne does not queue a streamed body: BodyFlow hands it to the application.
        return self._stream is not None

    @property
    def body_stream(self) -> BodyStream | None:
        """The body streaming to the application (None: a small body, in daphne's queue)."""
        return self._stream

    def connectionLost(self, reason: Failure) -> None:
        if self._stream is not None and not self._all_in:
            self._stream.fail()
        if self._gate is not None:
            self._gate.stopProducing()
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
        self._let_go_of_the_gate()
        super().finish()


class ArtifactsHTTPChannel(twisted_adapter.Channel):
    """Twisted's HTTP/1.1 channel, answering what its parser refuses with the API's envelope
    (see the module's docstring) and refusing an ambiguous ``Transfer-Encoding``."""

    def __init__(self) -> None:
        super().__init__()
        # The current request's method, target and version, read here as the line arrives:
        # the request learns them from Twisted only once its body is in.
        self.request_line = (b"", b"", b"HTTP/1.1")
        self._at_request_line = True
        self._head_size = 0  # bytes of the request line and headers so far (Twisted's count)
        self._encodings = 0  # Transfer-Encoding headers of this request
        self._closing: DelayedCall | None = None  # what closes a refused connection

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
            parts = line.split(b" ")
            # Twisted refuses any other shape (one space between three parts) itself.
            self.request_line = (
                (parts[0], parts[1], parts[2]) if len(parts) == 3 else (b"", b"", b"HTTP/1.1")
            )
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

    def malformed(self) -> None:
        self.refuse(
            b"400 Bad Request",
            malformed_request(
                "The request is not well-formed HTTP/1.1 (its request line, a header, the "
                "Content-Length or the chunked framing of its body)."
            ),
        )

    def refuse(self, status: bytes, error: ArtifactError) -> None:
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

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._closing is not None and self._closing.active():
            self._closing.cancel()
        super().connectionLost(reason)


class ArtifactsHTTPFactory(HTTPFactory):
    # This site's channel, plain: Twisted's default wraps a channel in a switch to HTTP/2 (when
    # TLS negotiates it), which would bypass every rule here; the site speaks HTTP/1.1 only.
    protocol = ArtifactsHTTPChannel

    def buildProtocol(self, addr: IAddress) -> ArtifactsHTTPChannel:
        protocol = cast(ArtifactsHTTPChannel, super().buildProtocol(addr))
        protocol.requestFactory = ArtifactsRequest
        return protocol

    def acceptableProtocols(self) -> list[bytes]:
        return [b"http/1.1"]


def _reactor() -> Any:
    from twisted.internet import reactor

    return cast(Any, reactor)


def install() -> None:
    """Make daphne's ``Server`` serve HTTP with ``ArtifactsRequest`` (idempotent)."""
    daphne_adapter.serve_http_with(ArtifactsHTTPFactory)


Scope = dict[str, Any]  # an ASGI scope
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyFlow:
    """The ASGI half of ``ArtifactsRequest``: what the application exchanges with the request it
    serves, both ways, with flow control.

    - A streamed request body: the first ``http.request`` message offers it under ``BODY_STREAM``
      (``take()`` hands it over as a file, see ``agent_site.body``); an application that calls
      ``receive`` again instead gets it in ``http.request`` messages as it arrives.
    - A streamed response (``more_body``): after each chunk, the application waits while the
      connection's send buffer is full (``SendGate``). Daphne hands every body message straight
      to Twisted, which would otherwise buffer what the client has not read yet: a 256 MiB blob
      to a slow client would grow the server by up to the whole blob.

    Under another server (the test client, uvicorn) it passes everything through.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = daphne_adapter.serving()
        if not isinstance(request, ArtifactsRequest) or scope["type"] != "http":
            return await self.app(scope, receive, send)
        stream = request.body_stream
        if stream is not None:
            receive = StreamedMessages(stream, receive).receive
        return await self.app(scope, receive, _paced(send, request))


def _paced(send: Send, request: ArtifactsRequest) -> Send:
    gate: SendGate | None = None

    async def paced(message: Message) -> None:
        nonlocal gate
        streams = message["type"] == "http.response.body" and message.get("more_body", False)
        if streams and gate is None:
            gate = request.send_gate()
        await send(message)
        if streams and gate is not None:
            await gate.sent(len(message.get("body", b"")))

    return paced
