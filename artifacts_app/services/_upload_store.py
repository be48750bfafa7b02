"""Where a resumable upload's bytes go while it is unfinished (``services.uploads``).

- Local storage: a file beside the blobs (``<location>/.uploads/<id>``), written at the offset and
  ``fdatasync``ed before the offset moves; whole, it is renamed into place under its hash (one
  filesystem: no copy). Bytes past the stored offset (a PATCH cut short by a kill) are truncated
  away when the next PATCH opens the file.
- S3: a multipart upload under ``uploads/<id>``. Parts of ``PART_SIZE`` go up as the bytes arrive;
  the bytes past the last part are kept in a tail object (``uploads/<id>.tail``) when a PATCH ends
  short of a part, and read back by the next, so every counted byte is in S3 and any process can
  go on. Whole, the multipart upload is completed and copied under its hash (S3's copy, no bytes
  through the server).

Either way a writer holds at most one part (S3) or one read chunk (local) in memory.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from typing import Any, Protocol

from django.core.files.storage import FileSystemStorage, Storage

from artifacts_app.errors import GoneError
from artifacts_app.models import Upload

PART_SIZE = 8 * 1024 * 1024  # S3 takes parts of 5 MiB or more (the last one aside)
HASH_CHUNK = 1024 * 1024
# Local files: the kernel is asked to start writing out every this many bytes as they arrive
# (Linux's sync_file_range), so that the fdatasync that makes an offset durable waits for the
# last few MiB instead of the whole PATCH: the disk works while the network does.
WRITE_BEHIND = 8 * 1024 * 1024
_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):
        return None  # not Linux: the fdatasync alone
    call.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    return call


_start_writeback = _sync_file_range()


def _lost(row: Upload) -> GoneError:
    return GoneError(
        "upload_lost",
        f"The bytes of upload {row.pk!r} are no longer stored; make a new upload and send them "
        "again.",
        {"upload": row.pk},
    )


class Writer(Protocol):
    position: int

    def write(self, chunk: bytes) -> None: ...

    def sync(self) -> dict[str, Any]: ...

    def abandon(self) -> None: ...

    def close(self) -> None: ...


class UploadStore(Protocol):
    def begin(self, row: Upload) -> None: ...

    def open(self, row: Upload) -> Writer: ...

    def rehash(self, row: Upload) -> str: ...

    def finish(self, row: Upload, name: str) -> None: ...

    def discard(self, row: Upload) -> None: ...


def store_for(storage: Storage) -> UploadStore:
    if isinstance(storage, FileSystemStorage):
        return LocalStore(storage)
    return S3Store(storage)


class LocalWriter:
    def __init__(self, path: str, row: Upload) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(self.fd).st_size < row.offset:
                raise _lost(row)
            os.ftruncate(self.fd, row.offset)  # what a cut-short PATCH left past the offset
            os.lseek(self.fd, row.offset, os.SEEK_SET)
        except BaseException:
            os.close(self.fd)
            raise
        self.position = row.offset
        self.written_out = row.offset  # where the kernel was last asked to write out from

    def write(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
            self.position += written
        pending = self.position - self.written_out
        if _start_writeback is not None and pending >= WRITE_BEHIND:
            _start_writeback(self.fd, self.written_out, pending, _SYNC_FILE_RANGE_WRITE)
            self.written_out = self.position

    def sync(self) -> dict[str, Any]:
        os.fdatasync(self.fd)
        self.written_out = self.position
        return {}

    def abandon(self) -> None:
        pass  # the next PATCH truncates back to the stored offset

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class LocalStore:
    def __init__(self, storage: FileSystemStorage) -> None:
        self.storage = storage
        self.folder = os.path.join(storage.location, ".uploads")

    def path(self, row: Upload) -> str:
        return os.path.join(self.folder, row.pk)

    def begin(self, row: Upload) -> None:
        os.makedirs(self.folder, exist_ok=True)
        fd = os.open(self.path(row), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)

    def open(self, row: Upload) -> LocalWriter:
        if not os.path.exists(self.path(row)):
            raise _lost(row)
        return LocalWriter(self.path(row), row)

    def rehash(self, row: Upload) -> str:
        digest = hashlib.sha256()
        with open(self.path(row), "rb") as fh:
            remaining = row.length
            while remaining > 0:
                chunk = fh.read(min(HASH_CHUNK, remaining))
                if not chunk:
                    raise _lost(row)
                digest.update(chunk)
                remaining -= len(chunk)
        return digest.hexdigest()

    def finish(self, row: Upload, name: str) -> None:
        source = self.path(row)
        if not os.path.exists(source):
            return  # moved already (a finish cut short after the move)
        with open(source, "rb+") as fh:
            fh.truncate(row.length)
        final = self.storage.path(name)
        if os.path.exists(final):
            os.unlink(source)
            return
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.chmod(source, 0o644)
        os.replace(source, final)

    def discard(self, row: Upload) -> None:
        try:
            os.unlink(self.path(row))
        except FileNotFoundError:
            pass


class S3Writer:
    def __init__(self, store: S3Store, row: Upload) -> None:
        self.store = store
        self.row = row
        self.parts: list[list[Any]] = [list(part) for part in row.parts]
        self.buffer = bytearray(store.read_tail(row) if row.tail else b"")
        if len(self.buffer) != row.tail:
            raise _lost(row)
        self.position = row.offset

    def write(self, chunk: bytes) -> None:
        self.buffer += chunk
        self.position += len(chunk)
        while len(self.buffer) >= PART_SIZE:
            self._part(bytes(self.buffer[:PART_SIZE]))
            del self.buffer[:PART_SIZE]

    def _part(self, data: bytes) -> None:
        number = len(self.parts) + 1
        answer = self.store.client.upload_part(
            Bucket=self.store.bucket,
            Key=self.store.key(self.row),
            UploadId=self.row.s3_upload_id,
            PartNumber=number,
            Body=data,
        )
        self.parts.append([number, answer["ETag"], len(data)])

    def sync(self) -> dict[str, Any]:
        if self.position == self.row.length and self.buffer:
            self._part(bytes(self.buffer))  # the last part may be small
            self.buffer.clear()
        if self.buffer:
            self.store.client.put_object(
                Bucket=self.store.bucket,
                Key=self.store.key(self.row) + ".tail",
                Body=bytes(self.buffer),
            )
        return {"parts": self.parts, "tail": len(self.buffer)}

    def abandon(self) -> None:
        pass  # parts past the stored ones are replaced by the next PATCH's (same numbers)

    def close(self) -> None:
        self.buffer = bytearray()


class S3Store:
    def __init__(self, storage: Storage) -> None:
        s3: Any = storage  # agent_site/s3.py's S3Storage
        self.storage = s3
        self.bucket: str = s3.bucket_name
        self.client: Any = s3.connection.meta.client

    def key(self, row: Upload) -> str:
        return str(self.storage.object_key(f"uploads/{row.pk}"))

    def begin(self, row: Upload) -> None:
        answer = self.client.create_multipart_upload(
            Bucket=self.bucket, Key=self.key(row), ContentType="application/octet-stream"
        )
        row.s3_upload_id = answer["UploadId"]

    def read_tail(self, row: Upload) -> bytes:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key(row) + ".tail")
        except self.client.exceptions.NoSuchKey:
            raise _lost(row) from None
        data: bytes = got["Body"].read()
        return data

    def open(self, row: Upload) -> S3Writer:
        return S3Writer(self, row)

    def _complete(self, row: Upload) -> None:
        parts = [{"PartNumber": number, "ETag": etag} for number, etag, _size in row.parts]
        try:
            if not parts:  # an empty upload: S3 wants a part; an empty object instead
                self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=self.key(row), UploadId=row.s3_upload_id
                )
                self.client.put_object(Bucket=self.bucket, Key=self.key(row), Body=b"")
                return
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=self.key(row),
                UploadId=row.s3_upload_id,
                MultipartUpload={"Parts": parts},
            )
        except self.client.exceptions.NoSuchUpload:
            pass  # completed already (a finish cut short): the object is there

    def rehash(self, row: Upload) -> str:
        self._complete(row)
        digest = hashlib.sha256()
        body = self.client.get_object(Bucket=self.bucket, Key=self.key(row))["Body"]
        for chunk in iter(lambda: body.read(HASH_CHUNK), b""):
            digest.update(chunk)
        return digest.hexdigest()

    def finish(self, row: Upload, name: str) -> None:
        self._complete(row)
        final = self.storage.object_key(name)
        if not self.storage.exists(name):
            self.client.copy(
                {"Bucket": self.bucket, "Key": self.key(row)},
                self.bucket,
                final,
                ExtraArgs={"ContentType": "application/octet-stream"},
            )
        self._remove(row)

    def _remove(self, row: Upload) -> None:
        self.client.delete_objects(
            Bucket=self.bucket,
            Delete={"Objects": [{"Key": self.key(row)}, {"Key": self.key(row) + ".tail"}]},
        )

    def discard(self, row: Upload) -> None:
        if row.s3_upload_id:
            try:
                self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=self.key(row), UploadId=row.s3_upload_id
                )
            except self.client.exceptions.NoSuchUpload:
                pass
        self._remove(row)
