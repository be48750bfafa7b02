"""django-storages' S3Storage with one botocore data loader per process, streamed reads and
uploads from a file's path.

**Reads** (``open_range``): django-storages' ``S3File`` downloads the whole object into a spooled
temporary file on its first read — in memory up to the spool's size, and held there while the
response streams (4 concurrent 256 MiB downloads grew the server by 1,090 MiB). ``S3RangeReader``
asks for the bytes it is to serve (``GetObject`` with ``Range``) and reads the response body as it
goes, ``read(n)`` at a time: a download holds one chunk, whatever the object's size, and a preview
or a ``Range`` request fetches only its bytes. Each read waits at most the client's read timeout.

**Uploads** (``upload_path``): django-storages' ``save()`` wraps the file so that boto3 sees it as
unseekable and buffers it whole; ``upload_file`` from a path reads one multipart part at a time.

S3Storage gives each thread a boto3 session of its own (sessions are not thread-safe), and each
new botocore session loads botocore's JSON models again (``endpoints.json``, S3's
``service-2.json``, …) into a cache of its own: measured here, ~130 ms of CPU and **~12.6 MiB of
RSS per thread** that touches the storage (eight threads: +106 MiB). The request threads live as
long as the process, so a daphne whose forty threads had each stored or served a blob
would hold ~500 MiB of copies of the same JSON (computed, 40 × 12.6 MiB). Here every session this
storage makes is given the process's one loader (its cache of parsed models): a thread's first S3
call costs ~20 ms and ~0.5 MiB. The sessions, clients and resources stay per thread, as before;
only the read-only parsed models are shared — as a botocore maintainer suggested in
boto/botocore#3078 and Airflow does (apache/airflow#40658).

Only django-storages' public names are used: the ``connection`` and ``unsigned_connection``
properties (made here, from the storage's settings, as S3Storage makes them) and
``storages.utils.safe_join``/``clean_name`` (the object's key, as S3Storage's methods make it).
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any

import boto3
import botocore
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.loaders import Loader
from django.core.exceptions import SuspiciousOperation
from storages.backends.s3 import S3Storage as _S3Storage
from storages.utils import clean_name, safe_join

_loader: Loader | None = None
# Guards the loader's making and the process's first connection, which makes it (re-entrant).
_lock = threading.RLock()
_parsed = False  # the first connection is made: the models are in the loader's cache


class _SearchPaths(list):
    """A loader's search paths, each once: boto3 appends its own data folder to the loader of
    every session it makes, so a shared loader's list would grow by one per thread."""

    def append(self, path: Any) -> None:
        if path not in self:
            super().append(path)


def shared_loader(core: botocore.session.Session) -> Loader:
    """The process's loader, made on first use with the search paths botocore would have used
    (``AWS_DATA_PATH``, as ``botocore.loaders.create_loader`` reads it)."""
    global _loader
    with _lock:
        if _loader is None:
            data_path = core.get_config_variable("data_path")
            paths = _SearchPaths(
                os.path.expanduser(os.path.expandvars(path))
                for path in (data_path.split(os.pathsep) if data_path else [])
            )
            _loader = Loader(extra_search_paths=paths)
        return _loader


class S3Storage(_S3Storage):
    """S3Storage whose per-thread sessions share the process's parsed botocore models.

    Its connections (``connection``, ``unsigned_connection``: public properties of S3Storage)
    are made here, per thread, from a session given the shared loader; the resource is made with
    the same settings as S3Storage's own."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.thread_resources = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()
        state.pop("thread_resources", None)  # a thread's resources stay in its process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.thread_resources = threading.local()

    @property
    def connection(self) -> Any:
        """This thread's resource. The process's first is made under a lock: the loader's cache
        does not lock, so threads whose first call overlapped the first parse (~130 ms) would
        each parse, and keep, a copy of their own."""
        resource = getattr(self.thread_resources, "signed", None)
        if resource is None:
            resource = self.thread_resources.signed = self.new_resource(self.client_config)
        return resource

    @property
    def unsigned_connection(self) -> Any:
        """This thread's resource for unsigned URLs (``querystring_auth`` off)."""
        resource = getattr(self.thread_resources, "unsigned", None)
        if resource is None:
            config = self.client_config.merge(Config(signature_version=botocore.UNSIGNED))
            resource = self.thread_resources.unsigned = self.new_resource(config)
        return resource

    def new_resource(self, config: Config) -> Any:
        """A resource as S3Storage makes one, from ``new_session``."""
        global _parsed

        def make() -> Any:
            return self.new_session().resource(
                "s3",
                region_name=self.region_name,
                use_ssl=self.use_ssl,
                endpoint_url=self.endpoint_url,
                config=config,
                verify=self.verify,
            )

        if _parsed:
            return make()
        with _lock:
            resource = make()
            _parsed = True
            return resource

    def new_session(self) -> boto3.Session:
        """A boto3 session as S3Storage makes one (a profile, or the keys), given the process's
        loader."""
        core = botocore.session.get_session()
        core.register_component("data_loader", shared_loader(core))
        if self.session_profile:
            return boto3.Session(profile_name=self.session_profile, botocore_session=core)
        return boto3.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            aws_session_token=self.security_token,
            botocore_session=core,
        )

    def object_key(self, name: str) -> str:
        """The object's key in the bucket for a storage name (under the storage's location), as
        S3Storage's own methods make it."""
        try:
            return str(safe_join(self.location, clean_name(name)))
        except ValueError:
            raise SuspiciousOperation(f"Attempted access to {name!r} denied.") from None

    def open_range(self, name: str, *, start: int = 0, end: int | None = None) -> S3RangeReader:
        """The object's bytes ``start``..``end`` (inclusive; None: to its end) as a binary file
        read as it streams from S3. The request is made here, so that a missing object or a storage
        that fails raises before anything is sent to a client."""
        return S3RangeReader(self, self.object_key(name), start=start, end=end)

    def upload_path(self, name: str, path: str) -> None:
        """Upload the file at ``path`` as ``name``, one multipart part at a time."""
        self.connection.Object(self.bucket_name, self.object_key(name)).upload_file(
            path,
            ExtraArgs={"ContentType": "application/octet-stream"},
            Config=self.transfer_config,
        )


class S3RangeReader(io.RawIOBase):
    """An S3 object's bytes ``start``..``end`` as a read-only binary file, streamed.

    One ``GetObject`` (with ``Range`` unless the whole object is wanted) whose body is read
    ``read(n)`` at a time; a ``seek`` elsewhere drops that body and the next read asks again from
    the new position. Reads may come from any thread, one at a time (the ASGI response reads each
    chunk on a worker thread): a new request uses the calling thread's client."""

    def __init__(self, storage: S3Storage, key: str, *, start: int = 0, end: int | None) -> None:
        super().__init__()
        self.storage = storage
        self.key = key
        self.position = start
        self.end = end  # inclusive; None: the object's end
        self.body: Any = None
        self._request()

    def _request(self) -> None:
        if self.end is not None and self.position > self.end:
            self.body = None
            return
        params: dict[str, str] = {}
        if self.position or self.end is not None:
            last = "" if self.end is None else str(self.end)
            params["Range"] = f"bytes={self.position}-{last}"
        try:
            got = self.storage.connection.Object(self.storage.bucket_name, self.key).get(**params)
        except ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 416:  # a position at or past the end: nothing to read
                self.body = None
                return
            if status == 404:
                raise FileNotFoundError(f"No stored object {self.key!r}") from error
            raise
        self.body = got["Body"]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self.position
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("seek from the end of an S3 object")
        if offset != self.position:
            self._drop()
            self.position = offset
            self._request()
        return self.position

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("read of a closed S3 object")
        if self.body is None:
            return b""
        chunk: bytes = self.body.read(None if size is None or size < 0 else size)
        self.position += len(chunk)
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def _drop(self) -> None:
        body, self.body = self.body, None
        if body is not None:
            body.close()  # the rest is not read: the connection is closed, not drained

    def close(self) -> None:
        if not self.closed:
            self._drop()
        super().close()
