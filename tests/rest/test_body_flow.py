"""A streamed response under a real daphne waits for the client (agent_site/server.py's
``BodyFlow`` and ``SendGate``, Twisted's producer and consumer): a client that reads slowly costs
the server a bounded amount of memory whatever the blob's size, and one that goes away mid-body
does not leave its sender waiting."""

from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid

import httpx

from tests.rest.test_body_road import SLUG, serve, site, sqlite_site  # noqa: F401 (fixtures)
from tests.rest.test_uploads import _peak_rss, _reset_peak
from tests.servers import HOST

MIB = 1024 * 1024
BLOB = 48 * MIB


def _stored(server, key: str) -> tuple[str, bytes]:
    contents = os.urandom(BLOB)
    with httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as client:
        made = client.post(
            f"/{SLUG}/v1/artifacts",
            json={"kind": "report", "key": f"big-{uuid.uuid4().hex}", "data": {}},
        )
        assert made.status_code == 201, made.text
        put = client.put(
            f"/{SLUG}/v1/artifacts/{made.json()['id']}/content",
            content=contents,
            headers={"Content-Type": "application/octet-stream"},
        )
        assert put.status_code in (200, 201), put.text
    return made.json()["id"], contents


def _download(server, key: str, artifact: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # the client reads slowly
    sock.settimeout(60)
    sock.connect((HOST, server.port))
    sock.sendall(
        f"GET /{SLUG}/v1/artifacts/{artifact}/content HTTP/1.1\r\nHost: {HOST}\r\n"
        f"Authorization: Bearer {key}\r\n\r\n".encode()
    )
    return sock


def test_a_slow_reader_of_a_large_download_keeps_the_server_flat(site):  # noqa: F811
    _, key, _ = site
    with serve(site, ARTIFACTS_MAX_CONTENT_BYTES=str(BLOB + MIB)) as server:
        artifact, contents = _stored(server, key)
        pid = server.process.pid
        before = _reset_peak(pid)
        with _download(server, key, artifact) as sock:
            first = sock.recv(65536)
            assert first.startswith(b"HTTP/1.1 200"), first[:200]
            time.sleep(3)  # the client reads nothing: the server must not buffer the blob
            growth = _peak_rss(pid) - before
            head, _, got = first.partition(b"\r\n\r\n")
            received = [got]
            size = len(got)
            while size < BLOB:
                chunk = sock.recv(MIB)
                assert chunk, f"the connection closed after {size} bytes"
                received.append(chunk)
                size += len(chunk)
    assert growth < 16 * MIB, f"the server grew by {growth / MIB:.1f} MiB for a paused client"
    assert hashlib.sha256(b"".join(received)).digest() == hashlib.sha256(contents).digest()


def test_a_reader_gone_mid_download_frees_its_sender(site):  # noqa: F811
    _, key, _ = site
    with serve(site, ARTIFACTS_MAX_CONTENT_BYTES=str(BLOB + MIB)) as server:
        artifact, contents = _stored(server, key)
        for _ in range(3):
            with _download(server, key, artifact) as sock:
                assert sock.recv(65536).startswith(b"HTTP/1.1 200")
                time.sleep(0.5)  # paused on a full send buffer
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
        # The server still answers, whole, on a new connection.
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            got = client.get(
                f"/{SLUG}/v1/artifacts/{artifact}/content",
                headers={"Authorization": f"Bearer {key}"},
            )
        assert got.status_code == 200 and got.content == contents
