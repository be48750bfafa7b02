"""Dependency failures, named once (docs/operations.md "When a dependency fails").

A request can fail because the service's own dependencies do: the database refuses, stalls past
its timeouts or is not there, the blob storage is full, read-only or unreachable. None of that is
the caller's fault, and none of it may answer an HTML 500 or hang. This module turns those
exceptions into ``UnavailableError`` (503, ``database_unavailable`` / ``storage_unavailable``) or
``StorageFullError`` (507, ``storage_full``), which every entry point already maps like any other
``ArtifactError``. The real exception is logged where it is mapped, never shown to the client (it
can name hosts and paths).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError, connections

from artifacts_app.errors import ArtifactError, StorageFullError, UnavailableError

# No room: the disk (or a quota, or a file size limit) is full.
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

try:  # S3 through django-storages (the scale extras); absent in the embedded install
    from boto3.exceptions import S3TransferFailedError, S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    # boto3's transfers (upload_file) wrap what failed (a ClientError, a timeout) in their own.
    _STORAGE_CLIENT_ERRORS: tuple[type[BaseException], ...] = (
        BotoCoreError,
        ClientError,
        S3UploadFailedError,
        S3TransferFailedError,
    )
except ImportError:  # pragma: no cover - depends on the install
    _STORAGE_CLIENT_ERRORS = ()


def database_unavailable() -> UnavailableError:
    return UnavailableError(
        "database_unavailable",
        "The database did not answer in time or refused the connection; nothing was changed. "
        "Retry later.",
    )


def database_full() -> StorageFullError:
    return StorageFullError(
        "storage_full",
        "The database's disk is full; nothing was changed. Retry once an operator has made room.",
    )


def storage_full() -> StorageFullError:
    return StorageFullError(
        "storage_full",
        "The blob storage is full; nothing was stored. Retry once an operator has made room.",
    )


def storage_unavailable() -> UnavailableError:
    return UnavailableError(
        "storage_unavailable",
        "The blob storage failed (read-only, unreachable or not answering); nothing was stored. "
        "Retry later.",
    )


def is_storage_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError | TimeoutError) or isinstance(exc, _STORAGE_CLIENT_ERRORS)


def storage_failure(exc: BaseException) -> UnavailableError:
    """The refusal for a storage exception: 507 when there is no room, else 503."""
    if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
        return storage_full()
    return storage_unavailable()


@contextmanager
def storage_errors() -> Iterator[None]:
    """Storage calls inside raise ``storage_failure(exc)`` for what the storage raised (the
    original chained as ``__cause__``); refusals of ours pass through unchanged."""
    try:
        yield
    except ArtifactError:
        raise
    except Exception as exc:
        if is_storage_error(exc):
            raise storage_failure(exc) from exc
        raise


def classify(exc: BaseException) -> UnavailableError | None:
    """The dependency failure ``exc`` is, or None when it is not one (a bug stays a 500).

    Blob storage errors are turned into refusals where the storage is called (``blobs``), so a
    bare ``OSError`` reaching an entry point is not assumed to be the storage's."""
    if isinstance(exc, UnavailableError):
        return exc
    if isinstance(exc, OperationalError | InterfaceError):
        if "database or disk is full" in str(exc):  # SQLite's SQLITE_FULL
            return database_full()
        return database_unavailable()
    return None


def database_probe(alias: str = "default") -> None:
    """Open (or reuse) the connection and run ``SELECT 1``; raises what the database raises.
    Bounded by the connection's timeouts (settings: ``DATABASE_CONNECT_TIMEOUT`` and the statement
    timeout on PostgreSQL, the busy timeout on SQLite)."""
    connection = connections[alias]
    if connection.connection is not None and not connection.is_usable():
        connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def describe(exc: BaseException) -> str:
    """A short, safe description of a dependency's failure (no hosts, no paths)."""
    name = type(exc).__name__
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, name)
    return name


def retry_after(error: object) -> str:
    return str(getattr(error, "retry_after", 5))
