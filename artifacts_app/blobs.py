"""Content-addressed blob storage (DESIGN.md §3, §4).

``blob_put`` streams bytes through sha256 into a temporary file, enforcing the size limit as it
goes, then moves them into Django's ``artifacts`` storage under a name made of the hash. It runs
*before* the tag's transaction: a rollback or crash leaves an unreferenced file for ``gc_blobs``,
never a record without its bytes. Identical contents are stored once.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.db import connection
from django.utils import timezone

from artifacts_app.errors import ArtifactError, TooLargeError
from artifacts_app.models import Blob

CHUNK_SIZE = 256 * 1024


@dataclass(frozen=True)
class StoredBlob:
    sha256: str
    size: int


def blob_storage() -> Storage:
    return storages["artifacts"]


def blob_name(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256[2:4]}/{sha256}"


def max_content_bytes() -> int:
    return int(settings.ARTIFACTS_MAX_CONTENT_BYTES)


def content_too_large(limit: int) -> TooLargeError:
    return TooLargeError(
        "content_too_large",
        f"The content is larger than ARTIFACTS_MAX_CONTENT_BYTES ({limit} bytes); "
        "store a smaller blob, or raise the limit in the server's settings.",
        {"limit": limit},
    )


def _chunks(source: bytes | str | IO[bytes] | Iterable[bytes]) -> Iterator[bytes]:
    if isinstance(source, str):
        yield source.encode("utf-8")
    elif isinstance(source, bytes | bytearray | memoryview):
        yield bytes(source)
    elif hasattr(source, "read"):
        if hasattr(source, "seek"):
            try:
                source.seek(0)
            except (OSError, ValueError):
                pass  # a pipe or a socket: read it from where it stands
        while True:
            chunk = source.read(CHUNK_SIZE)
            if not chunk:
                return
            if isinstance(chunk, str):
                chunk = chunk.encode("utf-8")
            yield chunk
    elif isinstance(source, Iterable):
        for chunk in source:
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise ArtifactError(
                    "invalid_contents", "Contents must be bytes, a string, or a binary file."
                )
            yield bytes(chunk)
    else:
        raise ArtifactError(
            "invalid_contents",
            f"Contents must be bytes, a string, or a binary file, not {type(source).__name__}.",
        )


def _temp_dir(storage: Storage) -> str:
    # On local disk, write next to the final place so that the move is an atomic rename.
    if isinstance(storage, FileSystemStorage):
        path = os.path.join(storage.location, ".incoming")
    else:
        path = str(settings.FILE_UPLOAD_TEMP_DIR)
    os.makedirs(path, exist_ok=True)
    return path


def blob_put(
    source: bytes | str | IO[bytes] | Iterable[bytes], *, max_bytes: int | None = None
) -> StoredBlob:
    """Store ``source`` (bytes, str as UTF-8, a binary file or an iterable of bytes) and return its hash.

    Never holds more than one chunk of a file-like source in memory. Past ``max_bytes`` (default
    ``ARTIFACTS_MAX_CONTENT_BYTES``) it stops reading, keeps nothing and raises ``TooLargeError``.
    """
    limit = max_content_bytes() if max_bytes is None else max_bytes
    storage = blob_storage()
    digest = hashlib.sha256()
    size = 0
    fd, tmp_path = tempfile.mkstemp(prefix="blob-", dir=_temp_dir(storage))
    try:
        with os.fdopen(fd, "wb") as tmp:
            for chunk in _chunks(source):
                size += len(chunk)
                if size > limit:
                    raise content_too_large(limit)
                digest.update(chunk)
                tmp.write(chunk)
        sha = digest.hexdigest()
        name = blob_name(sha)
        _claim(sha, size)
        if isinstance(storage, FileSystemStorage):
            final = storage.path(name)
            if not os.path.exists(final):
                os.makedirs(os.path.dirname(final), exist_ok=True)
                os.chmod(tmp_path, 0o644)
                os.replace(tmp_path, final)
        elif not storage.exists(name):
            if hasattr(storage, "bucket") and hasattr(storage, "_normalize_name"):
                _s3_upload(storage, name, tmp_path)
            else:
                with open(tmp_path, "rb") as fh:
                    storage.save(name, File(fh, name=name))
        return StoredBlob(sha256=sha, size=size)
    finally:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)


def _s3_upload(storage: Any, name: str, path: str) -> None:
    # django-storages' save() wraps the file so that boto3 sees it as unseekable and buffers it
    # whole; upload_file from a path reads one multipart part at a time (transfer_config).
    storage.bucket.Object(storage._normalize_name(name)).upload_file(
        path,
        ExtraArgs={"ContentType": "application/octet-stream"},
        Config=getattr(storage, "transfer_config", None),
    )


def _claim(sha256: str, size: int) -> None:
    # Before the storage is asked whether the bytes exist: insert the blob's row, or move its
    # created_at to now, committed at once; gc_blobs then leaves the bytes alone until the tag has
    # committed (artifacts_app/services/blobs.py explains the protocol). This is the tag's one
    # write of the Blob row.
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {connection.ops.quote_name(Blob._meta.db_table)} (sha256, size, created_at) "
            "VALUES (%s, %s, %s) ON CONFLICT (sha256) DO UPDATE SET created_at = EXCLUDED.created_at",
            [sha256, size, connection.ops.adapt_datetimefield_value(timezone.now())],
        )


def blob_open(sha256: str) -> IO[bytes]:
    """Open a stored blob for reading (binary)."""
    return blob_storage().open(blob_name(sha256), "rb")


def blob_exists(sha256: str) -> bool:
    return blob_storage().exists(blob_name(sha256))


def blob_iter(
    sha256: str, *, start: int = 0, end: int | None = None, chunk_size: int = CHUNK_SIZE
) -> Iterator[bytes]:
    """Yield the bytes ``start``..``end`` (inclusive; ``None``: to the end) in chunks."""
    with blob_open(sha256) as fh:
        if start:
            fh.seek(start)
        remaining = None if end is None else end - start + 1
        while remaining is None or remaining > 0:
            want = chunk_size if remaining is None else min(chunk_size, remaining)
            chunk = fh.read(want)
            if not chunk:
                return
            if remaining is not None:
                remaining -= len(chunk)
            yield chunk


def blob_read(sha256: str, *, start: int = 0, end: int | None = None) -> bytes:
    """The bytes ``start``..``end`` of a blob, whole. For small blobs and tests; stream large ones."""
    return b"".join(blob_iter(sha256, start=start, end=end))


def blob_delete(sha256: str) -> None:
    blob_storage().delete(blob_name(sha256))


def blob_url(sha256: str, **kwargs: Any) -> str | None:
    """A direct URL for the blob where the storage can sign one (S3), else None."""
    storage = blob_storage()
    if isinstance(storage, FileSystemStorage):
        return None
    return storage.url(blob_name(sha256), **kwargs)


def blob_redirect_url(sha256: str, content_type: str, disposition: str) -> str | None:
    """A short-lived presigned URL that serves the blob with these headers, when
    ``ARTIFACTS_S3_REDIRECT`` is on and the storage is S3; else None (stream it instead).

    The content view calls it after its access and ``If-None-Match`` checks, and answers a 302.
    """
    if not getattr(settings, "ARTIFACTS_S3_REDIRECT", False):
        return None
    storage = blob_storage()
    if isinstance(storage, FileSystemStorage) or not hasattr(storage, "bucket_name"):
        return None
    url: str = storage.url(  # type: ignore[call-arg]  # S3Storage.url takes parameters=
        blob_name(sha256),
        parameters={
            "ResponseContentType": content_type,
            "ResponseContentDisposition": disposition,
        },
    )
    return url
