"""S3 downloads stream in bounded chunks (agent_site/s3.py ``open_range``): a real daphne serving a
blob many times larger than a chunk from S3 (moto) grows by a bounded amount, whatever the size,
and the bytes arrive whole; ``Range`` and ``If-None-Match`` keep working on it."""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from artifacts_app import services
from tests.scale.test_processes import child_env
from tests.servers import DaphneServer

SIZE = 128 * 1024 * 1024
PIECE = 1024 * 1024
BOUND = 64 * 1024 * 1024  # generous: a whole-object spool would be SIZE


def piece(seed: bytes, i: int) -> bytes:
    return bytes([i % 251]) + seed[1:]


def pieces(seed: bytes, digest: Any) -> Iterator[bytes]:
    """The blob, made as it is sent (never whole in the test's memory either)."""
    for i in range(SIZE // PIECE):
        digest.update(piece(seed, i))
        yield piece(seed, i)


def expected(seed: bytes, start: int, end: int) -> bytes:
    return b"".join(piece(seed, i) for i in range(start // PIECE, end // PIECE + 1))[
        start % PIECE : start % PIECE + end - start + 1
    ]


class PeakRSS:
    """The peak resident memory of a process, sampled every 20 ms while the block runs."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.02)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.mark.scale
@pytest.mark.django_db(transaction=True)
def test_an_s3_download_holds_a_bounded_amount_of_server_memory_whatever_the_size():
    assert os.environ.get("ARTIFACTS_STORAGE") == "s3", "the scale run stores blobs in S3 (moto)"
    agent = services.agent_create(slug="s3-stream", max_artifacts=10)
    _, key = services.agent_key_create(agent=agent)
    auth = {"Authorization": f"Bearer {key}"}
    env = child_env()
    env.update(
        ARTIFACTS_S3_PREFIX=f"stream-{uuid.uuid4().hex}",
        ARTIFACTS_MAX_CONTENT_BYTES=str(SIZE + PIECE),
    )
    with (
        DaphneServer(env) as server,
        httpx.Client(base_url=server.base_url, headers=auth, timeout=120) as client,
    ):
        record = client.post(
            "/s3-stream/v1/artifacts", json={"kind": "report", "key": "big", "data": {}}
        ).json()
        url = f"/s3-stream/v1/artifacts/{record['id']}/content"
        uploaded = hashlib.sha256()
        seed = os.urandom(PIECE)
        put = client.put(
            url,
            content=pieces(seed, uploaded),
            headers={"Content-Type": "application/octet-stream"},
        )
        assert put.status_code == 200, put.text[:300]
        sha = uploaded.hexdigest()
        assert put.json()["content"]["sha256"] == sha

        # Warm: the thread's S3 client and the first ranged read are made before the baseline.
        first = client.get(url, headers={"Range": "bytes=0-0"})
        assert first.status_code == 206 and len(first.content) == 1
        baseline = psutil.Process(server.process.pid).memory_info().rss

        downloaded = hashlib.sha256()
        received = 0
        with PeakRSS(server.process.pid) as rss, client.stream("GET", url) as response:
            assert response.status_code == 200
            assert response.headers["content-length"] == str(SIZE)
            for chunk in response.iter_bytes(PIECE):
                downloaded.update(chunk)
                received += len(chunk)
        assert received == SIZE and downloaded.hexdigest() == sha
        grown = rss.peak - baseline
        assert grown < BOUND, f"one {SIZE >> 20} MiB download grew the server by {grown >> 20} MiB"

        # A range is fetched as a range, and the 304 check needs no read at all.
        start, end = SIZE // 2 - 3, SIZE // 2 + 6  # across two pieces
        ranged = client.get(url, headers={"Range": f"bytes={start}-{end}"})
        assert ranged.status_code == 206
        assert ranged.headers["content-range"] == f"bytes {start}-{end}/{SIZE}"
        assert ranged.content == expected(seed, start, end)
        tail = client.get(url, headers={"Range": "bytes=-5"})
        assert tail.status_code == 206 and tail.content == expected(seed, SIZE - 5, SIZE - 1)
        assert client.get(url, headers={"If-None-Match": f'"{sha}"'}).status_code == 304


@pytest.mark.scale
@pytest.mark.django_db(transaction=True)
def test_s3_blob_reads_fetch_their_range_and_seek_anywhere():
    from artifacts_app import blobs
    from artifacts_app.errors import UnavailableError

    payload = os.urandom(3 * blobs.CHUNK_SIZE + 17)
    sha = blobs.blob_put(payload).sha256
    assert blobs.blob_read(sha) == payload
    assert (
        blobs.blob_read(sha, start=5, end=blobs.CHUNK_SIZE + 5) == payload[5 : blobs.CHUNK_SIZE + 6]
    )
    assert blobs.blob_read(sha, start=len(payload) - 3) == payload[-3:]
    with blobs.blob_open(sha, start=100, end=199) as fh:
        assert fh.tell() == 100 and fh.read(1000) == payload[100:200] and fh.read(10) == b""
        fh.seek(7)  # back before the range asked for: a new request from there
        assert fh.read(3) == payload[7:10]
    with blobs.blob_open(sha) as fh:
        fh.seek(len(payload) + 10)  # past the end: nothing to read, no error
        assert fh.read(10) == b""
    assert blobs.blob_read(blobs.blob_put(b"").sha256) == b""
    with pytest.raises(UnavailableError) as missing:
        blobs.blob_open("0" * 64)
    assert missing.value.code == "storage_unavailable"
