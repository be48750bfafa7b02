from __future__ import annotations

import hashlib
import io
import tracemalloc

import pytest

from artifacts_app import blobs
from artifacts_app.errors import TooLargeError
from tests.conftest import blob_files

# blob_put claims the blob's row before storing it (artifacts_app/services/blobs.py).
pytestmark = pytest.mark.django_db


class Endless(io.RawIOBase):
    """A file that yields zeros forever: a put must stop at the limit without reading it all."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.read_bytes += size
        return b"\0" * size


def test_put_streams_and_enforces_limit_while_reading():
    source = Endless()
    with pytest.raises(TooLargeError):
        blobs.blob_put(source, max_bytes=10 * 1024 * 1024)
    assert source.read_bytes <= 10 * 1024 * 1024 + blobs.CHUNK_SIZE
    assert blob_files() == []


def test_put_of_a_large_file_does_not_hold_it_in_memory(tmp_path, settings):
    # On S3 (scale profile) boto3 uploads 8 MiB parts two at a time: a bigger file, a bigger bound.
    s3 = not settings.STORAGES["artifacts"]["BACKEND"].endswith("FileSystemStorage")
    mib, bound = (64, 24) if s3 else (16, 4)
    path = tmp_path / "big.bin"
    with open(path, "wb") as fh:
        for i in range(mib * 4):
            fh.write(bytes([i % 256]) * (256 * 1024))
    tracemalloc.start()
    with open(path, "rb") as fh:
        stored = blobs.blob_put(fh)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < bound * 1024 * 1024
    assert stored.size == mib * 1024 * 1024
    assert stored.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_ranged_reads():
    stored = blobs.blob_put(bytes(range(256)) * 4)
    assert blobs.blob_read(stored.sha256, start=0, end=3) == bytes([0, 1, 2, 3])
    assert blobs.blob_read(stored.sha256, start=1020) == bytes([252, 253, 254, 255])
    assert b"".join(blobs.blob_iter(stored.sha256, chunk_size=7)) == bytes(range(256)) * 4
