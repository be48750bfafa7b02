"""A request body streamed from daphne's reactor to the application as it arrives, with flow
control (``agent_site.server``'s request feeds it; see that module for the whole road)."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

FEED_CHUNK = 1024 * 1024  # the largest http.request message made from a stream
# Flow control: the socket is not read while this many bytes wait for the application...
HIGH_WATER = 4 * 1024 * 1024
# ... and is read again once it has taken them below this.
LOW_WATER = 1024 * 1024
# The message key under which a streamed body is offered to the application as a file-like
# ``BodyStream`` (``agent_site.asgi``'s handler takes it).
BODY_STREAM = "agent_site.body_stream"

Message = dict[str, Any]  # an ASGI message


def _body_incomplete() -> Exception:
    from artifacts_app.errors import ArtifactError

    return ArtifactError(
        "body_incomplete",
        "The request body ended before it was whole: the connection closed, or the server "
        "refused the body. Send the whole body again.",
    )


def _body_timeout(seconds: float) -> Exception:
    from artifacts_app.errors import StalledError

    return StalledError(
        "body_timeout",
        f"No more of the request body arrived for {seconds:g} s, so the server stopped waiting "
        "for it (ARTIFACTS_BODY_IDLE_SECONDS). Send the whole body again.",
        {"seconds": seconds},
    )


def release_connections() -> None:
    """Give back this thread's database connections before it waits for body bytes: closed (or,
    with ``?pool=1``, returned to the pool), opened again at the next query. A slow body then
    holds a request thread but no connection (PostgreSQL's ``max_connections`` is shared by
    everyone). A connection inside a transaction is kept: closing it would lose the transaction."""
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()


class BodyStream:
    """A request body as it arrives: fed on the reactor's thread, read as a binary file (``read``)
    on the request's thread, or in messages (``read_nowait``) on the event loop.

    ``pause``/``resume`` stop and restart reading the socket; they are called on the reactor's
    thread. ``read`` blocks until it has ``size`` bytes or the end (waiting for at most the
    low-water mark at a time, so never on bytes the flow control holds back); a body that will
    not be whole raises ``body_incomplete``; one that stalls — ``read`` waiting, and nothing
    arrived for ``idle_seconds`` since the client last could send (its last bytes, or the socket
    resumed) — raises ``body_timeout`` (and every later read ``body_incomplete``), so a client
    gone quiet mid-body does not hold the request's thread. ``close`` (the reader is done) drops
    what comes after. ``release`` (``release_connections`` for a request) runs on the reader's
    thread before ``read`` waits for bytes that have not arrived.
    """

    def __init__(
        self,
        pause: Callable[[], None],
        resume: Callable[[], None],
        idle_seconds: float = 30.0,
        release: Callable[[], None] | None = None,
    ) -> None:
        self.idle_seconds = idle_seconds
        self._release = release
        # When the client last could send and did (bytes fed, or the socket resumed): the idle
        # clock's start.
        self._active_at = time.monotonic()
        self._cond = threading.Condition()
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._wanted = 1
        self._ended = False
        self._failed = False
        self._closed = False
        self._paused = False
        self._pause = pause
        self._resume = resume
        self.on_data: Callable[[], None] | None = None  # the event loop's reader's wake-up

    # The reactor's side.
    def feed(self, data: bytes) -> None:
        with self._cond:
            if self._closed or self._failed:
                return
            self._chunks.append(data)
            self._buffered += len(data)
            self._active_at = time.monotonic()
            if self._buffered >= self._wanted:
                self._cond.notify()
            # Paused again whenever over: Twisted's channel may resume the socket on its own
            # (its send buffer drained).
            pause = self._buffered > HIGH_WATER
            self._paused = self._paused or pause
        if pause:
            self._pause()
        if self.on_data is not None:
            self.on_data()

    def end(self) -> None:
        self._settle(failed=False)

    def fail(self) -> None:
        """The body will not be whole (the client went away, the door refused it)."""
        self._settle(failed=True)

    def _settle(self, *, failed: bool) -> None:
        with self._cond:
            if self._ended or self._failed:
                return
            self._failed = failed
            self._ended = not failed
            if failed:
                self._chunks.clear()
                self._buffered = 0
            self._cond.notify_all()
        if self.on_data is not None:
            self.on_data()

    # The reader's side.
    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all, if negative), fewer only at the end, as a buffered file
        answers (parsers read a body whole with one ``read``)."""
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(FEED_CHUNK), b""))
        parts = []
        taken = 0
        while taken < size:
            with self._cond:
                # Never wait for more than resumes a paused socket (LOW_WATER): a reader waiting
                # for more while the socket stays paused would wait for nothing.
                self._wanted = max(1, min(size - taken, LOW_WATER))
                waits = self._buffered < self._wanted and not self._ended and not self._failed
            if waits and self._release is not None:
                self._release()  # outside the lock: the reactor's feed never waits on it
            with self._cond:
                while self._buffered < self._wanted and not self._ended and not self._failed:
                    idle_left = self.idle_seconds - (time.monotonic() - self._active_at)
                    if idle_left <= 0:
                        self._stalled()
                    self._cond.wait(idle_left)
                data = self._take(size - taken)
            if not data:
                break
            parts.append(data)
            taken += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _stalled(self) -> None:
        # Under the lock (re-entrant): nothing arrived for idle_seconds since the client last could
        # send. The body will not be whole, as when the client goes away.
        self._settle(failed=True)
        raise _body_timeout(self.idle_seconds)

    def ready(self) -> bool:
        """Whether ``read_nowait`` has something to answer (bytes, or the end)."""
        return bool(self._chunks) or self._ended

    def read_nowait(self, size: int) -> tuple[bytes, bool]:
        """What has arrived, up to ``size`` bytes, and whether more is to come."""
        with self._cond:
            data = self._take(size)
            return data, not (self._ended and not self._chunks)

    def _take(self, size: int) -> bytes:
        # Under the lock.
        if self._failed:
            raise _body_incomplete()
        parts = []
        taken = 0
        while self._chunks and taken < size:
            chunk = self._chunks.popleft()
            if taken + len(chunk) > size:
                cut = size - taken
                self._chunks.appendleft(chunk[cut:])
                chunk = chunk[:cut]
            parts.append(chunk)
            taken += len(chunk)
        self._buffered -= taken
        if self._paused and self._buffered <= LOW_WATER:
            self._paused = False
            self._active_at = time.monotonic()  # the client could not send while paused
            self._resume_reading()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        """The reader is done: what is buffered or still comes is dropped, the socket read."""
        with self._cond:
            self._closed = True
            self._chunks.clear()
            self._buffered = 0
            resume, self._paused = self._paused, False
        if resume:
            self._resume_reading()

    def _resume_reading(self) -> None:
        # From the request's thread or the event loop: the socket is resumed on the reactor's.
        from twisted.internet import reactor

        cast(Any, reactor).callFromThread(self._resume)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def failed(self) -> bool:
        """Whether the body will not be whole (the client went away, the door refused it)."""
        return self._failed

    def readable(self) -> bool:
        return True


class StreamedMessages:
    """A streamed body as the application's ``receive`` answers it (``agent_site.server``'s
    ``BodyFlow`` makes one per streamed request, around daphne's ``receive``).

    The first message offers the stream: an empty ``http.request`` whose ``BODY_STREAM`` key is
    this object (``take()`` hands the stream over, to be read as a file). An application that
    calls ``receive`` again instead gets the body as it arrives, up to ``FEED_CHUNK`` bytes per
    message, then daphne's own messages (a disconnect); so does one whose body will not be whole.
    Runs on the event loop, whose thread is the reactor's (daphne runs Twisted on asyncio): the
    stream's ``on_data`` wakes a waiting ``receive`` directly.
    """

    def __init__(self, stream: BodyStream, receive: Callable[[], Awaitable[Message]]) -> None:
        self._stream = stream
        self._receive = receive
        self._offered = False
        self._taken = False
        self._done = False
        self._arrived = asyncio.Event()

    async def receive(self) -> Message:
        if not self._offered:
            self._offered = True
            return {"type": "http.request", "body": b"", "more_body": True, BODY_STREAM: self}
        if not self._taken and not self._done:
            stream = self._stream
            stream.on_data = self._arrived.set
            while not stream.ready() and not stream.failed:
                self._arrived.clear()
                await self._arrived.wait()
            if not stream.failed:
                chunk, more = stream.read_nowait(FEED_CHUNK)
                self._done = not more
                return {"type": "http.request", "body": chunk, "more_body": more}
            self._done = True
        return await self._receive()

    def take(self) -> BodyStream:
        """The body as a file, now the caller's to read and close; the messages that follow are
        daphne's own (a disconnect)."""
        self._taken = True
        self._stream.on_data = None
        return self._stream
