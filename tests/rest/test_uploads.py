"""Uploads through a real daphne: never through Twisted's form parser, streamed through sha256 into
storage in constant memory, and refused as soon as they pass the content limit (agent_site/server.py).

Twisted parses every multipart POST body whole, in memory, before daphne hands it on (a 64 MiB
upload grew the server by ~775 MiB); daphne then queues the whole body at once. Either coming back
fails the peak-RSS bounds here, and ``test_daphne_serves_with_the_sites_request`` names the cause.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from pathlib import Path

import httpx
import orjson
import pytest

from tests.servers import HOST, DaphneServer, sqlite_site, wait_for

MIB = 1024 * 1024
LIMIT = 80 * MIB
RSS_BOUND = 32 * MIB


@contextlib.contextmanager
def _serve(data_dir: Path, **settings: str):
    """A daphne of the site on its own SQLite data dir, with an agent key: (server, client, key)."""
    env, key = sqlite_site(
        data_dir, ARTIFACTS_STORAGE="", ARTIFACTS_MAX_CONTENT_BYTES=str(LIMIT), **settings
    )
    with DaphneServer(env, log_path=data_dir / "daphne.log", ready_path="/reviewer/v1/") as server:
        client = httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        )
        yield server, client, key
        client.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("uploads")
    with _serve(data_dir) as (server, client, key):
        yield server, client, key, data_dir


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def _reset_peak(pid: int) -> int:
    """Reset the process's peak RSS to its current RSS (Linux: clear_refs 5); answers the peak."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass  # not permitted: the peak then only grows, which keeps the bound strict
    return _peak_rss(pid)


def _files(root: Path) -> set[Path]:
    return {
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.suffix not in {".sqlite3", ".log"}
        and "-wal" not in p.name
        and "-shm" not in p.name
    }


def _tag_multipart(client: httpx.Client, contents: bytes) -> httpx.Response:
    return client.post(
        "/reviewer/v1/artifacts",
        files={
            "record": (None, orjson.dumps({"kind": "report", "key": "big", "data": {}})),
            "contents": ("big.bin", contents, "application/octet-stream"),
        },
    )


def test_daphne_serves_with_the_sites_request():
    """agent_site.asgi installs agent_site.server's request into daphne's server: a daphne started
    for this site (bin/run, tests/servers.py, the benches, plain `daphne`) never parses forms."""
    import daphne.server

    import agent_site.asgi  # noqa: F401 (installs)
    from agent_site.server import ArtifactsHTTPChannel, ArtifactsHTTPFactory, ArtifactsRequest

    assert daphne.server.HTTPFactory is ArtifactsHTTPFactory
    protocol = ArtifactsHTTPFactory(server=None).buildProtocol(("127.0.0.1", 1))
    assert isinstance(protocol, ArtifactsHTTPChannel)
    assert protocol.requestFactory is ArtifactsRequest


def _streamed():
    """A streamed body as the site's daphne request hands it to the application (the socket
    calls recorded): the application's ``receive``, and daphne's own queue behind it."""
    import asyncio

    from agent_site.body import BodyStream, StreamedMessages

    calls = []
    stream = BodyStream(lambda: calls.append("pause"), lambda: calls.append("resume"))
    daphnes = asyncio.Queue()
    return stream, StreamedMessages(stream, daphnes.get).receive, daphnes, calls


def test_a_streamed_body_is_handed_to_django_as_the_stream_itself():
    """The server request offers the body as a stream; the site's handler makes it the request's
    body as it is (no spool file: the view reads the bytes as they arrive)."""
    from asgiref.sync import async_to_sync

    from agent_site.asgi import django_asgi_app

    stream, receive, daphnes, _ = _streamed()

    body = async_to_sync(django_asgi_app.read_body)(receive)
    assert body is stream
    stream.feed(b"x" * 300_000)
    assert body.read(100_000) == b"x" * 100_000  # what has arrived, without waiting for the end
    stream.feed(b"y")
    stream.end()
    assert body.read() == b"x" * 200_000 + b"y"
    assert body.read(10) == b""
    assert daphnes.empty()  # no body message left for the handler's disconnect listener
    body.close()


def test_an_application_that_ignores_the_offer_gets_the_body_in_messages():
    import asyncio

    from agent_site.body import FEED_CHUNK

    async def run():
        stream, receive, daphnes, _ = _streamed()
        assert (await receive())["body"] == b""  # the offer, not taken
        waiting = asyncio.ensure_future(receive())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # nothing has arrived yet: the reader waits
        stream.feed(b"y" * (FEED_CHUNK + 10))
        stream.end()
        message = await waiting
        body = message["body"]
        while message["more_body"]:
            message = await receive()
            body += message["body"]
        assert body == b"y" * (FEED_CHUNK + 10)
        daphnes.put_nowait({"type": "http.disconnect"})
        assert await receive() == {"type": "http.disconnect"}  # then daphne's own

    asyncio.run(run())


def test_an_application_reading_messages_of_a_body_that_fails_gets_the_disconnect():
    import asyncio

    async def run():
        stream, receive, daphnes, _ = _streamed()
        await receive()  # the offer, not taken
        waiting = asyncio.ensure_future(receive())
        await asyncio.sleep(0.01)
        daphnes.put_nowait({"type": "http.disconnect"})
        stream.fail()  # the client went away mid-body
        assert await asyncio.wait_for(waiting, 5) == {"type": "http.disconnect"}

    asyncio.run(run())


def test_the_socket_is_not_read_while_the_application_is_behind(monkeypatch):
    from agent_site.body import HIGH_WATER, LOW_WATER

    stream, _, _, calls = _streamed()
    piece = b"z" * 65536
    for _ in range(HIGH_WATER // len(piece)):
        stream.feed(piece)
    assert calls == []
    stream.feed(piece)
    assert calls == ["pause"]
    # Taken down to the low-water mark: read again (on the reactor's thread).
    from twisted.internet import reactor

    later = []  # no reactor runs in this process: the calls it would run are run here
    monkeypatch.setattr(reactor, "callFromThread", lambda f, *a: later.append(f), raising=False)
    while stream._buffered > LOW_WATER:
        stream.read(len(piece))
    for call in later:
        call()
    assert calls == ["pause", "resume"]


def test_64_mib_uploads_keep_the_server_within_32_mib(served):
    server, client, _, _ = served
    pid = server.process.pid
    # Warm up both routes, so that first-use imports and caches are not counted.
    assert _tag_multipart(client, b"warm-up").status_code in (200, 201)
    record = _tag_multipart(client, b"warm-up 2").json()
    put = client.put(
        f"/reviewer/v1/artifacts/{record['id']}/content",
        content=b"warm",
        headers={"Content-Type": "text/plain"},
    )
    assert put.status_code == 200, put.text

    blob = os.urandom(MIB) * 64
    before = _reset_peak(pid)
    tagged = _tag_multipart(client, blob)
    multipart_growth = _peak_rss(pid) - before
    assert tagged.status_code == 200, tagged.text  # the key existed: replaced
    assert tagged.json()["content"]["sha256"] == hashlib.sha256(blob).hexdigest()
    assert tagged.json()["content"]["size"] == len(blob)

    raw = blob[::-1]
    before = _reset_peak(pid)
    put = client.put(
        f"/reviewer/v1/artifacts/{record['id']}/content",
        content=raw,
        headers={"Content-Type": "application/octet-stream"},
    )
    raw_growth = _peak_rss(pid) - before
    assert put.status_code == 200, put.text
    assert put.json()["content"] == {
        "size": len(raw),
        "contentType": "application/octet-stream",
        "sha256": hashlib.sha256(raw).hexdigest(),
    }
    downloaded = client.get(f"/reviewer/v1/artifacts/{record['id']}/content")
    assert hashlib.sha256(downloaded.content).hexdigest() == hashlib.sha256(raw).hexdigest()

    assert multipart_growth < RSS_BOUND, (
        f"multipart grew the server by {multipart_growth / MIB:.1f} MiB"
    )
    assert raw_growth < RSS_BOUND, f"raw PUT grew the server by {raw_growth / MIB:.1f} MiB"


def _exchange(head: bytes, body_chunks) -> tuple[bytes, int]:
    """Send a request head and body chunks on a raw socket, then read one whole response;
    answer (the response, body bytes sent before the server stopped taking them)."""
    sent = 0
    with socket.create_connection((HOST, _exchange.port), timeout=30) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        answer = _read_response(sock, until_reset=True)
    return answer, sent


def _envelope(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, orjson.loads(body)


def test_a_body_past_the_limit_is_refused_before_it_is_read_and_nothing_is_kept(served):
    server, client, key, data_dir = served
    _exchange.port = server.port
    record = _tag_multipart(client, b"small").json()
    kept = _files(data_dir)
    path = f"/reviewer/v1/artifacts/{record['id']}/content".encode()

    # Declared too large: answered at once, before a byte of the body is sent.
    head = (
        b"PUT "
        + path
        + b" HTTP/1.1\r\nHost: "
        + HOST.encode()
        + b"\r\nAuthorization: Bearer "
        + key.encode()
        + b"\r\nContent-Type: application/octet-stream\r\nContent-Length: "
        + str(LIMIT + 1).encode()
        + b"\r\n\r\n"
    )
    answer, sent = _exchange(head, [])
    status, body = _envelope(answer)
    assert (status, body["error"]["code"], sent) == (413, "content_too_large", 0)
    assert body["error"]["details"] == {"limit": LIMIT}

    # Chunked, no length: refused once the limit is passed; the rest is read and dropped.
    head = (
        b"PUT "
        + path
        + b" HTTP/1.1\r\nHost: "
        + HOST.encode()
        + b"\r\nAuthorization: Bearer "
        + key.encode()
        + b"\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"z" * MIB
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
    answer, _ = _exchange(head, [chunk] * 90 + [b"0\r\n\r\n"])
    status, body = _envelope(answer)
    assert (status, body["error"]["code"]) == (413, "content_too_large")

    # A multipart tag whose file part passes the limit, within what the door lets in: the upload
    # handler stops it while parsing; past the door's limit, daphne answers on Content-Length.
    for size in (LIMIT + MIB, LIMIT + 20 * MIB):
        refused = _tag_multipart(client, b"q" * size)
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["code"] == "content_too_large"

    assert _files(data_dir) == kept  # no blob, no temporary file left behind
    assert client.get(f"/reviewer/v1/artifacts/{record['id']}").json()["content"]["size"] == 5


def _incoming(data_dir: Path) -> list[Path]:
    """The blob writer's temporary files (the bytes of uploads in progress)."""
    return [p for p in data_dir.rglob("blob-*") if p.is_file()]


def _put_head(path: bytes, key: str, length: int) -> bytes:
    return (
        b"PUT " + path + b" HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\nAuthorization: Bearer "
        b"" + key.encode() + b"\r\nContent-Type: application/octet-stream\r\n"
        b"Content-Length: " + str(length).encode() + b"\r\n\r\n"
    )


def _file_part_start(boundary: bytes, record: bytes) -> bytes:
    """A multipart body up to its file part's bytes: the `record` part, the `contents` part's head."""
    return (
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="record"\r\n\r\n'
        b"" + record + b"\r\n"
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="contents"; '
        b'filename="c.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
    )


def _post_head(key: str, boundary: bytes, length: int) -> bytes:
    return (
        b"POST /reviewer/v1/artifacts HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\n"
        b"Authorization: Bearer " + key.encode() + b"\r\n"
        b"Content-Type: multipart/form-data; boundary=" + boundary + b"\r\n"
        b"Content-Length: " + str(length).encode() + b"\r\n\r\n"
    )


def test_the_body_is_stored_as_it_arrives(served):
    """The application starts at the headers: the blob's file is being written while the client
    still holds back the rest of the body (daphne alone would wait for all of it)."""
    server, client, key, data_dir = served
    record = _tag_multipart(client, b"small").json()
    first, rest = os.urandom(2 * MIB), os.urandom(3 * MIB)
    path = f"/reviewer/v1/artifacts/{record['id']}/content".encode()
    with socket.create_connection((HOST, server.port), timeout=60) as sock:
        sock.sendall(_put_head(path, key, len(first) + len(rest)) + first)
        written = wait_for(
            lambda: [p for p in _incoming(data_dir) if p.stat().st_size > 0],
            "the blob's file written before the last byte was sent",
        )
        assert written[0].stat().st_size <= len(first)
        sock.sendall(rest)
        answer = b""
        while b'"sha256"' not in answer or not answer.endswith(b"}"):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    status, body = _envelope(answer)
    assert status == 200, body
    assert body["content"]["sha256"] == hashlib.sha256(first + rest).hexdigest()
    assert _incoming(data_dir) == []


def test_a_client_gone_mid_body_leaves_nothing_behind(served):
    server, client, key, data_dir = served
    record = _tag_multipart(client, b"small").json()
    kept = _files(data_dir)
    path = f"/reviewer/v1/artifacts/{record['id']}/content".encode()
    with socket.create_connection((HOST, server.port), timeout=60) as sock:
        sock.sendall(_put_head(path, key, 8 * MIB) + os.urandom(2 * MIB))
        wait_for(lambda: _incoming(data_dir), "the upload under way")
    # Gone: the view's read fails, the half-written blob is removed, the record is as it was.
    wait_for(lambda: not _incoming(data_dir), "the half-written blob removed")
    assert _files(data_dir) == kept
    assert client.get(f"/reviewer/v1/artifacts/{record['id']}").json()["content"]["size"] == 5

    # The same for a multipart tag cut off inside its file part.
    boundary = b"cutcutcut"
    part = _file_part_start(boundary, b'{"kind": "report", "key": "cut", "data": {}}')
    head = _post_head(key, boundary, 8 * MIB)
    with socket.create_connection((HOST, server.port), timeout=60) as sock:
        sock.sendall(head + part + os.urandom(2 * MIB))
        wait_for(lambda: _incoming(data_dir), "the multipart upload under way")
    wait_for(lambda: not _incoming(data_dir), "the half-written file part removed")
    assert _files(data_dir) == kept
    assert client.get("/reviewer/v1/artifacts", params={"key": "cut"}).json()["results"] == []


def _read_response(sock: socket.socket, *, until_reset: bool = False) -> bytes:
    """One whole response (its head and Content-Length bytes), or what came before the server
    closed; with ``until_reset``, also what came before a reset or the socket's timeout."""
    answer = b""
    while True:
        head, found, rest = answer.partition(b"\r\n\r\n")
        if found:
            length = [
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ]
            if length and len(rest) >= length[0]:
                return answer
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            if until_reset:
                return answer
            raise
        if not data:
            return answer
        answer += data


def test_an_answer_before_the_body_is_in_keeps_the_connection(served):
    """Refused at the headers (an unknown key), a large body is answered at once, before the
    client sent the rest; the rest is read and dropped, and the same connection serves the next
    request."""
    server, client, _, data_dir = served
    record = _tag_multipart(client, b"small").json()
    path = f"/reviewer/v1/artifacts/{record['id']}/content".encode()
    body = os.urandom(6 * MIB)
    with socket.create_connection((HOST, server.port), timeout=60) as sock:
        sock.sendall(_put_head(path, "nope", len(body)) + body[:MIB])
        status, refused = _envelope(_read_response(sock))
        assert (status, refused["error"]["code"]) == (401, "invalid_token"), refused
        sock.sendall(body[MIB:])
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\n\r\n")
        status, health = _envelope(_read_response(sock))
        assert status == 200, health
    assert _incoming(data_dir) == []


def test_a_large_json_body_is_read_whole_from_the_stream(served):
    """A JSON tag past the streaming threshold, larger than one flow-control window: the parser's
    one ``read`` gets all of it."""
    _, client, _, _ = served
    text = "j" * (3 * MIB)
    tagged = client.post(
        "/reviewer/v1/artifacts",
        json={"kind": "report", "key": "json", "data": {}, "contents": text},
    )
    assert tagged.status_code in (200, 201), tagged.text[:300]
    content = client.get(f"/reviewer/v1/artifacts/{tagged.json()['id']}/content")
    assert content.text == text


def test_chunked_tags_are_read_as_they_arrive(served):
    """A client that streams what it does not know the length of sends the body chunked, with no
    Content-Length (httpx and requests do, for a generator): DRF alone reads such a body as empty
    and answered `record_required` / `data_required`."""
    server, client, key, data_dir = served
    contents = os.urandom(3 * MIB + 17)
    boundary = b"chunkedxyz"
    record = b'{"kind": "report", "key": "chunked", "data": {"n": 1}}'
    body = _file_part_start(boundary, record) + contents + b"\r\n--" + boundary + b"--\r\n"

    def pieces(raw: bytes, size: int = 256 * 1024):
        for start in range(0, len(raw), size):
            yield raw[start : start + size]

    response = client.post(
        "/reviewer/v1/artifacts",
        content=pieces(body),
        headers={"Content-Type": "multipart/form-data; boundary=chunkedxyz"},
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in response.request.headers
    assert response.status_code in (200, 201), response.text
    record = response.json()
    assert record["data"] == {"n": 1}
    assert record["content"]["size"] == len(contents)
    assert record["content"]["sha256"] == hashlib.sha256(contents).hexdigest()
    downloaded = client.get(f"/reviewer/v1/artifacts/{record['id']}/content")
    assert downloaded.content == contents

    json_tag = client.post(
        "/reviewer/v1/artifacts",
        content=pieces(b'{"kind": "report", "key": "chunked-json", "data": {"ok": true}}', 7),
        headers={"Content-Type": "application/json"},
    )
    assert json_tag.status_code == 201, json_tag.text
    assert json_tag.json()["data"] == {"ok": True}

    # Past the JSON body limit (10 MiB by default): refused while it is read, nothing stored.
    kept = _files(data_dir)
    too_big = client.post(
        "/reviewer/v1/artifacts",
        content=pieces(b'{"kind": "report", "data": "' + b"x" * (11 * MIB) + b'"}', MIB),
        headers={"Content-Type": "application/json"},
    )
    assert too_big.status_code == 413, too_big.text
    assert too_big.json()["error"]["code"] == "body_too_large"
    assert _files(data_dir) == kept


def test_a_body_that_stalls_frees_its_thread_with_408(tmp_path):
    """A client gone quiet mid-body: the view waits ARTIFACTS_BODY_IDLE_SECONDS for more, then
    answers 408 `body_timeout` and keeps nothing; the server serves on."""
    with _serve(tmp_path, ARTIFACTS_BODY_IDLE_SECONDS="1") as (server, client, key):
        _exchange.port = server.port
        record = _tag_multipart(client, b"small").json()
        kept = _files(tmp_path)
        path = f"/reviewer/v1/artifacts/{record['id']}/content".encode()
        with socket.create_connection((HOST, server.port), timeout=30) as sock:
            sock.sendall(_put_head(path, key, 4 * MIB))
            sock.sendall(b"s" * MIB)  # a quarter of it, then nothing
            wait_for(lambda: _incoming(tmp_path), "the blob's incoming file")
            answer = _read_response(sock)
        status, body = _envelope(answer)
        assert (status, body["error"]["code"]) == (408, "body_timeout")
        assert body["error"]["details"] == {"seconds": 1}
        wait_for(lambda: _files(tmp_path) == kept, "the incoming file removed")

        # A multipart tag that stalls in its file part: the same answer, nothing kept.
        head = _post_head(key, b"xyz", 4 * MIB)
        part = _file_part_start(b"xyz", b'{"kind": "report", "data": {}}')
        with socket.create_connection((HOST, server.port), timeout=30) as sock:
            sock.sendall(head + part + b"m" * 200_000)
            answer = _read_response(sock)
        status, body = _envelope(answer)
        assert (status, body["error"]["code"]) == (408, "body_timeout")
        wait_for(lambda: _files(tmp_path) == kept, "the incoming file removed")

        after = client.get(f"/reviewer/v1/artifacts/{record['id']}")
        assert after.status_code == 200 and after.json()["content"]["size"] == 5
