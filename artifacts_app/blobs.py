"""Content-addressed blob storage (DESIGN.md §3, §4).

``blob_put`` streams bytes through sha256 into a temporary file, enforcing the size limit as it
goes, then moves them into Django's ``artifacts`` storage under a name made of the hash. It runs
*before* the tag's transaction: a rollback or crash leaves an unreferenced file for ``gc_blobs``,
never a record without its bytes. Identical contents are stored once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.db import connection
from django.utils import timezone

from artifacts_app import faults, metrics
from artifacts_app.errors import ArtifactError, TooLargeError
from artifacts_app.jsontypes import JSONObject
from artifacts_app.models import Blob

log = logging.getLogger(__name__)

CHUNK_SIZE = 256 * 1024
TEMP_PREFIX = "blob-"  # BlobWriter's temporary files; gc_blobs sweeps those a crash left


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


def _temp_path(storage: Storage) -> str:
    # On local disk, write next to the final place so that the move is an atomic rename.
    if isinstance(storage, FileSystemStorage):
        return os.path.join(storage.location, ".incoming")
    return str(settings.FILE_UPLOAD_TEMP_DIR)


def _temp_dir(storage: Storage) -> str:
    path = _temp_path(storage)
    os.makedirs(path, exist_ok=True)
    return path


@dataclass
class TempSweep:
    removed: int = 0
    bytes: int = 0


def temp_files_sweep(*, older_than: float, dry_run: bool = False) -> TempSweep:
    """Remove (``dry_run``: count) the temporary files of uploads that never finished — a crash
    or a kill mid-upload leaves them — last written before ``older_than`` (a POSIX time): the
    ``BlobWriter`` files beside the storage (or in ``FILE_UPLOAD_TEMP_DIR`` with S3) and Django's
    named upload files in ``FILE_UPLOAD_TEMP_DIR``. A live upload writes its file as bytes arrive,
    so its modification time stays young."""
    report = TempSweep()
    dirs = dict.fromkeys([_temp_path(blob_storage()), str(settings.FILE_UPLOAD_TEMP_DIR)])
    for path in dirs:
        try:
            entries = list(os.scandir(path))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise faults.storage_failure(exc) from exc
        for entry in entries:
            if not (entry.name.startswith(TEMP_PREFIX) or ".upload" in entry.name):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if not entry.is_file(follow_symlinks=False) or info.st_mtime >= older_than:
                    continue
                if not dry_run:
                    os.unlink(entry.path)
            except FileNotFoundError:
                continue  # its upload finished or was discarded meanwhile
            except OSError as exc:
                raise faults.storage_failure(exc) from exc
            report.removed += 1
            report.bytes += info.st_size
    return report


def storage_probe() -> JSONObject:
    """Whether the blob storage takes an upload now (``/healthz``): a small file is written,
    synced and removed where uploads write theirs (beside local storage, and the request bodies'
    spool, ``FILE_UPLOAD_TEMP_DIR``), and the free bytes there are reported; with S3 the bucket
    must also answer a lookup (bounded by the client's timeouts). Raises what the storage raises."""
    storage = blob_storage()
    free = None
    for path in dict.fromkeys([_temp_dir(storage), _temp_dir_of_spool()]):
        fd, name = tempfile.mkstemp(prefix=TEMP_PREFIX + "probe-", dir=path)
        try:
            os.write(fd, b"ok")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(name)
        stat = os.statvfs(path)
        room = stat.f_bavail * stat.f_frsize
        free = room if free is None else min(free, room)
    if not isinstance(storage, FileSystemStorage):
        storage.exists("healthz-probe")
    return {"freeBytes": free}


def _temp_dir_of_spool() -> str:
    path = str(settings.FILE_UPLOAD_TEMP_DIR)
    os.makedirs(path, exist_ok=True)
    return path


class BlobWriter:
    """Bytes written here go through sha256 into a temporary file beside the storage, under the
    size limit; ``finish`` moves them into place under their hash. ``blob_put`` writes through one,
    and so does the multipart upload handler (``rest/parsers.py``), so that an uploaded file is
    hashed and written once, as it arrives. ``discard`` (or a refusal) keeps nothing."""

    def __init__(self, *, max_bytes: int | None = None) -> None:
        self.limit = max_content_bytes() if max_bytes is None else max_bytes
        self.storage = blob_storage()
        self.size = 0
        self._digest = hashlib.sha256()
        self._path = ""
        self._file: IO[bytes] | None = None
        self.stored: StoredBlob | None = None
        # A full or read-only storage answers 507/503 (faults), never a 500.
        with faults.storage_errors():
            fd, self._path = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=_temp_dir(self.storage))
            self._file = os.fdopen(fd, "wb")

    def write(self, chunk: bytes | memoryview) -> None:
        if self._file is None:
            raise ValueError("the blob was finished or discarded")
        self.size += len(chunk)
        if self.size > self.limit:
            self.discard()
            raise content_too_large(self.limit)
        self._digest.update(chunk)
        try:
            self._file.write(chunk)
        except OSError as exc:
            self.discard()
            raise faults.storage_failure(exc) from exc

    def discard(self) -> None:
        """Close and remove the temporary file; never raises (it runs on failure paths, where the
        disk that refused a write may refuse the close's flush too)."""
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass
        if self._path:
            try:
                os.unlink(self._path)
            except FileNotFoundError:
                pass
            except OSError:
                log.exception("could not remove the temporary blob %s (gc_blobs will)", self._path)

    def finish(self) -> StoredBlob:
        if self.stored is not None:
            return self.stored
        if self._file is None:
            raise ValueError("the blob was discarded")
        try:
            with faults.storage_errors():
                self._file.close()  # the last buffered bytes may not fit: ENOSPC here too
            self._file = None
            sha = self._digest.hexdigest()
            _claim(sha, self.size)
            with faults.storage_errors():
                self._move_into_place(blob_name(sha))
            self.stored = StoredBlob(sha256=sha, size=self.size)
            metrics.UPLOAD_BYTES.inc(self.size)
            return self.stored
        finally:
            self.discard()

    def _move_into_place(self, name: str) -> None:
        storage = self.storage
        if isinstance(storage, FileSystemStorage):
            final = storage.path(name)
            if not os.path.exists(final):
                os.makedirs(os.path.dirname(final), exist_ok=True)
                os.chmod(self._path, 0o644)
                os.replace(self._path, final)
        elif not storage.exists(name):
            upload_path = getattr(storage, "upload_path", None)  # S3 (agent_site/s3.py)
            if callable(upload_path):
                upload_path(name, self._path)
            else:
                with open(self._path, "rb") as fh:
                    storage.save(name, File(fh, name=name))


def blob_put(
    source: bytes | str | IO[bytes] | Iterable[bytes], *, max_bytes: int | None = None
) -> StoredBlob:
    """Store ``source`` (bytes, str as UTF-8, a binary file or an iterable of bytes) and return its hash.

    Never holds more than one chunk of a file-like source in memory. Past ``max_bytes`` (default
    ``ARTIFACTS_MAX_CONTENT_BYTES``) it stops reading, keeps nothing and raises ``TooLargeError``.
    A file that was written through a ``BlobWriter`` as it was received (an upload) is moved into
    place without being read again.
    """
    writer = getattr(source, "blob_writer", None)
    if isinstance(writer, BlobWriter):
        return writer.finish()
    writer = BlobWriter(max_bytes=max_bytes)
    try:
        for chunk in _chunks(source):
            writer.write(chunk)
    except BaseException:
        writer.discard()
        raise
    return writer.finish()


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


def blob_open(sha256: str, *, start: int = 0, end: int | None = None) -> IO[bytes]:
    """Open a stored blob for reading (binary), positioned at ``start``; ``end`` (inclusive) is
    the last byte the caller will read, so that a storage that streams (S3: ``open_range`` in
    agent_site/s3.py) fetches no more. A missing blob or a failing storage raises here (503,
    ``faults``), before a response is begun."""
    storage = blob_storage()
    with faults.storage_errors():
        open_range = getattr(storage, "open_range", None)
        if callable(open_range):
            opened: IO[bytes] = open_range(blob_name(sha256), start=start, end=end)
            return opened
        fh = storage.open(blob_name(sha256), "rb")
        if start:
            fh.seek(start)
        return fh


def blob_exists(sha256: str) -> bool:
    with faults.storage_errors():
        return blob_storage().exists(blob_name(sha256))


def blob_iter(
    sha256: str, *, start: int = 0, end: int | None = None, chunk_size: int = CHUNK_SIZE
) -> Iterator[bytes]:
    """Yield the bytes ``start``..``end`` (inclusive; ``None``: to the end) in chunks, never more
    than one chunk in memory and never more of the blob fetched than asked for."""
    with blob_open(sha256, start=start, end=end) as fh:
        remaining = None if end is None else end - start + 1
        while remaining is None or remaining > 0:
            want = chunk_size if remaining is None else min(chunk_size, remaining)
            with faults.storage_errors():
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
    with faults.storage_errors():
        blob_storage().delete(blob_name(sha256))


def blob_url(sha256: str, **kwargs: object) -> str | None:
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
