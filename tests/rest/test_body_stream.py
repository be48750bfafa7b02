"""A streamed request body's idle bound (agent_site/body.py): counted from the client's last bytes,
never tripped by the server's own flow control, never by a slow but steady client."""

from __future__ import annotations

import threading
import time

import pytest

from agent_site.body import HIGH_WATER, LOW_WATER, BodyStream
from artifacts_app.errors import ArtifactError

MIB = 1024 * 1024


@pytest.fixture
def reactor_calls(monkeypatch):
    """No reactor runs in this process: what it would run for the stream is run at once."""
    from twisted.internet import reactor

    monkeypatch.setattr(reactor, "callFromThread", lambda f, *a: f(*a), raising=False)


def _feed_later(stream: BodyStream, schedule: list[tuple[float, bytes]], *, end: bool) -> None:
    start = time.monotonic()

    def feeder() -> None:
        for at, data in schedule:
            time.sleep(max(0.0, at - (time.monotonic() - start)))
            stream.feed(data)
        if end:
            stream.end()

    threading.Thread(target=feeder, daemon=True).start()


def test_the_idle_bound_counts_from_the_last_bytes():
    stream = BodyStream(lambda: None, lambda: None, idle_seconds=1.0)
    start = time.monotonic()
    _feed_later(stream, [(0.05, b"x")], end=False)  # one byte just after the read began, then none
    with pytest.raises(ArtifactError) as refused:
        stream.read(10)
    after_last_byte = time.monotonic() - start - 0.05
    assert refused.value.code == "body_timeout" and refused.value.status == 408
    # Never early; and not a whole second window late (counting from when the wait began, it came
    # ~1.95 s after the byte).
    assert 1.0 <= after_last_byte < 1.6, after_last_byte
    with pytest.raises(ArtifactError) as later:
        stream.read(1)
    assert later.value.code == "body_incomplete"


def test_a_slow_but_steady_client_is_read_whole():
    stream = BodyStream(lambda: None, lambda: None, idle_seconds=1.0)
    _feed_later(stream, [(0.3 * i, b"%d" % i) for i in range(1, 8)], end=True)
    assert stream.read(100) == b"1234567"  # 2.1 s in one read, never 1 s without a byte


def test_the_flow_control_never_trips_the_idle_bound(reactor_calls):
    # The socket paused past HIGH_WATER stays paused until the reader takes the buffer down to
    # LOW_WATER; a reader that waited for more than that would wait for bytes that cannot come.
    stream = BodyStream(
        lambda: None,
        lambda: _feed_later(stream, [(0.0, b"y" * (3 * MIB // 2))], end=True),
        idle_seconds=1.0,
    )
    for _ in range(5):
        stream.feed(b"x" * MIB)
    assert stream._paused and 5 * MIB > HIGH_WATER
    assert len(stream.read(7 * MIB // 2)) == 7 * MIB // 2  # 1.5 MiB left: still paused
    assert stream._paused and stream._buffered > LOW_WATER
    rest = stream.read(3 * MIB)  # takes the 1.5 MiB, resumes the socket, reads what comes
    assert len(rest) == 3 * MIB
    assert stream.read(1) == b""


def test_the_reader_gives_its_connections_back_only_before_it_waits():
    """``release`` (the request's database connections) runs on the reader's thread before a read
    that must wait for bytes, never when what it asks for has arrived."""
    released: list[str] = []
    stream = BodyStream(
        lambda: None,
        lambda: None,
        idle_seconds=5.0,
        release=lambda: released.append(threading.current_thread().name),
    )
    stream.feed(b"abc")
    assert stream.read(3) == b"abc"
    assert released == []  # it was there: no wait, the connection is kept
    _feed_later(stream, [(0.2, b"d")], end=True)
    assert stream.read(1) == b"d"
    assert released == [threading.current_thread().name]
