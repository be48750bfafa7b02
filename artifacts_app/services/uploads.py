"""Resumable uploads (API.md "Large contents", DESIGN.md §17): the one implementation behind
``/<slug>/v1/uploads`` (tus 1.0), the tag's ``upload`` and its known contents.

An upload's bytes are written as they arrive — into a file beside the blob storage, or into an S3
multipart upload (``_store.py``) — in memory bounded by a constant. Its ``offset`` (the row) moves
only past bytes that are durable: fsynced, or in completed S3 parts (the bytes past the last part
in a tail object). So an upload interrupted anywhere, the client gone or the server killed,
resumes from the offset the server reports, every byte before it kept.

One PATCH writes an upload at a time: it holds a lease on the row (``host:pid:nonce`` and an end);
another PATCH meanwhile is refused with 423. A lease whose process is gone (this host, a dead pid)
or whose time is over is taken over, so a server killed mid-PATCH does not lock its upload.

The sha256 of the whole upload is computed as the bytes arrive, kept in this process between
PATCHes (``_HASHES``); a PATCH that reaches another process, or one after a restart, leaves it
unknown, and the finished bytes are then read once more to hash them. The finished upload is moved
into the blob storage under its hash (claimed as any tag's blob, ``blobs._claim``) and one tag may
use it (``upload_take``). ``uploads_expire`` (``gc_blobs``) removes what expired.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from artifacts_app import blobs, faults, media
from artifacts_app.errors import (
    ArtifactError,
    ChecksumMismatchError,
    ConflictError,
    GoneError,
    LockedError,
    NotFoundError,
    TooLargeError,
)
from artifacts_app.models import Agent, Artifact, ArtifactVersion, Blob, Upload
from artifacts_app.services._upload_store import UploadStore, store_for
from artifacts_app.tag_input import UPLOAD_ID_PATTERN

READ_CHUNK = 1024 * 1024
# Without a checksum to check first, a PATCH makes its bytes durable and moves the offset every
# this many bytes: a server killed mid-PATCH loses less than this.
CHECKPOINT = 16 * 1024 * 1024
CHECKSUMS: Mapping[str, Callable[[], Any]] = {"sha256": hashlib.sha256, "sha1": hashlib.sha1}
_HOLDER = f"{socket.gethostname()}:{os.getpid()}"

# upload id -> (offset, sha256 of the bytes before it): the hash carried between PATCHes.
_HASHES: OrderedDict[str, tuple[int, Any]] = OrderedDict()
_HASHES_MAX = 1024
_hashes_lock = threading.Lock()


@dataclass(frozen=True)
class UploadState:
    id: str
    length: int
    offset: int
    expires_at: datetime
    metadata: dict[str, str]

    @property
    def finished(self) -> bool:
        return self.offset == self.length


def max_upload_bytes() -> int:
    return int(settings.ARTIFACTS_MAX_UPLOAD_BYTES)


def unknown_upload(upload_id: str) -> NotFoundError:
    return NotFoundError(
        "unknown_upload",
        f"There is no upload {upload_id!r} of this agent (never made, used, deleted, or removed "
        "after it expired); make one with POST uploads.",
        {"upload": upload_id},
    )


def _state(row: Upload) -> UploadState:
    return UploadState(
        id=row.id,
        length=row.length,
        offset=row.offset,
        expires_at=row.expires_at,
        metadata=dict(row.metadata),
    )


def _row(agent: Agent, upload_id: str) -> Upload:
    """The agent's upload; another agent's, a used one and a missing one are the same 404, an
    expired one 410."""
    row = Upload.objects.filter(pk=upload_id, agent_id=agent.pk, used_at__isnull=True).first()
    if row is None:
        raise unknown_upload(upload_id)
    if row.expires_at <= timezone.now():
        raise GoneError(
            "upload_expired",
            f"Upload {upload_id!r} expired at {row.expires_at.isoformat()} "
            "(ARTIFACTS_UPLOAD_EXPIRY); make a new one and send the bytes again.",
            {"upload": upload_id},
        )
    return row


def upload_create(*, agent: Agent, length: int, metadata: Mapping[str, str]) -> UploadState:
    """Make an upload of ``length`` bytes (at most ``ARTIFACTS_MAX_UPLOAD_BYTES``). ``metadata``'s
    ``contentType``, when given, must be one media type."""
    limit = max_upload_bytes()
    if length < 0:
        raise ArtifactError(
            "invalid_upload_length",
            "Upload-Length is the upload's size in bytes: a whole number, 0 or more.",
            {"header": "Upload-Length"},
        )
    if length > limit:
        raise TooLargeError(
            "upload_too_large",
            f"Upload-Length {length} is more than ARTIFACTS_MAX_UPLOAD_BYTES ({limit} bytes); "
            "send a smaller file, or raise the limit in the server's settings.",
            {"limit": limit},
        )
    content_type = metadata.get("contentType")
    if content_type is not None:
        media.canonical(content_type)  # 400 invalid_content_type
    store = store_for(blobs.blob_storage())
    upload_id = "up_" + secrets.token_urlsafe(18)
    now = timezone.now()
    row = Upload(
        id=upload_id,
        agent=agent,
        length=length,
        metadata=dict(metadata),
        created_at=now,
        expires_at=now + timedelta(seconds=int(settings.ARTIFACTS_UPLOAD_EXPIRY)),
    )
    with faults.storage_errors():
        store.begin(row)
    row.save(force_insert=True)
    if length == 0:
        _finish(store, row, hashlib.sha256())
    return _state(row)


def upload_status(*, agent: Agent, upload_id: str) -> UploadState:
    """The upload as the server holds it: its offset counts only durable bytes."""
    return _state(_row(agent, upload_id))


def upload_delete(*, agent: Agent, upload_id: str) -> None:
    """Remove the upload and what it stored (tus ``termination``); a PATCH writing it is refused
    with 423 first."""
    row = _row(agent, upload_id)
    if _lease_alive(row):
        raise _locked(upload_id)
    if Upload.objects.filter(pk=row.pk, lease=row.lease).delete()[0] == 0:
        raise _locked(upload_id)
    _forget(row.pk)
    if not row.sha256:
        with faults.storage_errors():
            store_for(blobs.blob_storage()).discard(row)


def _locked(upload_id: str) -> LockedError:
    return LockedError(
        "upload_locked",
        f"Another request is writing upload {upload_id!r} now; ask its offset (HEAD) once it "
        "ends, then go on from there.",
        {"upload": upload_id},
    )


def _lease_alive(row: Upload) -> bool:
    if not row.lease or row.lease_until is None or row.lease_until <= timezone.now():
        return False
    host, _, rest = row.lease.partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False  # its process was killed: the lease ended with it
        except PermissionError:
            return True
    return True


def _lease_take(row: Upload) -> str:
    lease = f"{_HOLDER}:{secrets.token_hex(4)}"
    # One PATCH can last no longer than the body deadline (agent_site/server.py).
    until = timezone.now() + timedelta(seconds=int(settings.ARTIFACTS_BODY_DEADLINE_SECONDS) + 60)
    taken = Upload.objects.filter(pk=row.pk, lease=row.lease, offset=row.offset).update(
        lease=lease, lease_until=until
    )
    if not taken:
        raise _locked(row.pk)
    return lease


def _commit(row: Upload, lease: str, **fields: Any) -> None:
    """Move the upload on (offset, parts) while this PATCH holds its lease."""
    if Upload.objects.filter(pk=row.pk, lease=lease).update(**fields) != 1:
        raise _locked(row.pk)  # deleted or taken over meanwhile: nothing more is written
    for name, value in fields.items():
        setattr(row, name, value)


def _remember(upload_id: str, offset: int, digest: Any) -> None:
    with _hashes_lock:
        _HASHES[upload_id] = (offset, digest.copy())
        _HASHES.move_to_end(upload_id)
        while len(_HASHES) > _HASHES_MAX:
            _HASHES.popitem(last=False)


def _recall(upload_id: str, offset: int) -> Any:
    if offset == 0:
        return hashlib.sha256()
    with _hashes_lock:
        kept = _HASHES.get(upload_id)
    if kept is None or kept[0] != offset:
        return None  # hashed again once finished
    return kept[1].copy()


def _forget(upload_id: str) -> None:
    with _hashes_lock:
        _HASHES.pop(upload_id, None)


def parse_checksum(header: str | None) -> tuple[str, bytes] | None:
    """``Upload-Checksum: <algorithm> <base64 digest>``; 400 for an algorithm not in
    ``CHECKSUMS`` or a digest that is not base64."""
    if header is None:
        return None
    algorithm, _, encoded = header.strip().partition(" ")
    if algorithm not in CHECKSUMS:
        raise ArtifactError(
            "unsupported_checksum",
            f"Upload-Checksum's algorithm {algorithm[:40]!r} is not one the server takes; "
            f"use one of {', '.join(CHECKSUMS)}.",
            {"header": "Upload-Checksum", "algorithms": list(CHECKSUMS)},
        )
    try:
        digest = base64.b64decode(encoded.strip(), validate=True)
    except (ValueError, TypeError):
        digest = b""
    if len(digest) != CHECKSUMS[algorithm]().digest_size:
        raise ArtifactError(
            "invalid_checksum",
            f"Upload-Checksum is `{algorithm} <the digest in base64>`.",
            {"header": "Upload-Checksum"},
        )
    return algorithm, digest


def upload_write(
    *,
    agent: Agent,
    upload_id: str,
    offset: int,
    body: IO[bytes],
    length: int | None,
    checksum: tuple[str, bytes] | None = None,
) -> UploadState:
    """Write ``body`` (``length`` bytes, when known) at ``offset`` (tus PATCH).

    ``offset`` must be the upload's (else 409 ``offset_mismatch``). Without ``checksum`` the
    bytes count as they become durable: a body that breaks off keeps what arrived. With one, the
    PATCH counts whole or not at all (460 ``checksum_mismatch``, the offset kept)."""
    row = _row(agent, upload_id)
    if offset != row.offset:
        raise ConflictError(
            "offset_mismatch",
            f"Upload-Offset {offset} is not the upload's offset ({row.offset}); ask it (HEAD) "
            "and send the bytes from there.",
            {"offset": row.offset},
        )
    if length is not None and offset + length > row.length:
        raise _past_length(row)
    if _lease_alive(row):
        raise _locked(upload_id)
    if length == 0 and row.offset < row.length:
        return _state(row)  # no bytes: nothing to write, no lease taken from a PATCH to come
    if row.offset == row.length:
        if not row.sha256:
            _finish(store_for(blobs.blob_storage()), row, None)  # a finish cut short
        return _state(row)
    lease = _lease_take(row)
    store = store_for(blobs.blob_storage())
    digest = _recall(row.pk, offset)
    try:
        _write(store, row, lease, body, digest, checksum)
    finally:
        Upload.objects.filter(pk=row.pk, lease=lease).update(lease="", lease_until=None)
    return _state(row)


def _past_length(row: Upload) -> TooLargeError:
    return TooLargeError(
        "upload_past_length",
        f"The body goes past the upload's Upload-Length ({row.length} bytes, {row.offset} "
        "of them stored); send only the bytes that remain.",
        {"length": row.length, "offset": row.offset},
    )


def _write(
    store: UploadStore,
    row: Upload,
    lease: str,
    body: IO[bytes],
    digest: Any,
    checksum: tuple[str, bytes] | None,
) -> None:
    check = CHECKSUMS[checksum[0]]() if checksum is not None else None
    start_digest = digest.copy() if digest is not None else None
    with faults.storage_errors():
        writer = store.open(row)
    failure: BaseException | None = None
    try:
        while True:
            try:
                chunk = body.read(READ_CHUNK)
            except ArtifactError as exc:  # the body broke off, stalled or was refused
                failure = exc
                break
            if not chunk:
                break
            if writer.position + len(chunk) > row.length:
                failure = _past_length(row)
                break
            try:
                writer.write(chunk)
            except Exception as exc:
                if not faults.is_storage_error(exc):
                    raise
                failure = faults.storage_failure(exc)
                break
            if digest is not None:
                digest.update(chunk)
            if check is not None:
                check.update(chunk)
            elif writer.position - row.offset >= CHECKPOINT:
                _durable(store, writer, row, lease, digest)
        if check is not None:
            assert checksum is not None
            if failure is None and check.digest() != checksum[1]:
                failure = ChecksumMismatchError(
                    "checksum_mismatch",
                    f"The body's {checksum[0]} is not the Upload-Checksum sent; the upload stays "
                    f"at offset {row.offset}: send those bytes again.",
                    {"offset": row.offset},
                )
            if failure is not None:
                if start_digest is not None:
                    _remember(row.pk, row.offset, start_digest)
                writer.abandon()
                raise failure
        if writer.position > row.offset:
            try:
                _durable(store, writer, row, lease, digest)
            except Exception as exc:
                if not faults.is_storage_error(exc):
                    raise
                failure = failure or faults.storage_failure(exc)
        if failure is not None:
            raise failure
        if row.offset == row.length:
            _finish(store, row, digest)
    finally:
        writer.close()


def _durable(store: UploadStore, writer: Any, row: Upload, lease: str, digest: Any) -> None:
    fields = writer.sync()  # the bytes so far durable; the row's fields that say so
    _commit(row, lease, offset=writer.position, **fields)
    if digest is not None:
        _remember(row.pk, row.offset, digest)


def _finish(store: UploadStore, row: Upload, digest: Any) -> None:
    """The upload is whole: its bytes go into the blob storage under their hash."""
    with faults.storage_errors():
        sha = digest.hexdigest() if digest is not None else store.rehash(row)
        Upload.objects.filter(pk=row.pk).update(sha256=sha)
        row.sha256 = sha
        blobs._claim(sha, row.length)
        store.finish(row, blobs.blob_name(sha))
    _forget(row.pk)


# --- a finished upload or known contents, as a tag's contents ----------------------------------


@dataclass(frozen=True)
class Taken:
    sha256: str
    size: int
    content_type: str | None
    upload_id: str | None = None


def upload_take(*, agent: Agent, upload_id: str) -> Taken:
    """A finished upload's blob for a tag (checked before the tag's lock; ``upload_mark_used``
    in its transaction makes the use once)."""
    if not isinstance(upload_id, str) or not re.fullmatch(UPLOAD_ID_PATTERN, upload_id):
        raise ArtifactError(
            "invalid_upload", "`upload` is an upload's id, as POST uploads made it."
        )
    row = _row(agent, upload_id)
    if row.offset == row.length and not row.sha256:
        _finish(store_for(blobs.blob_storage()), row, None)  # a finish cut short
    if row.offset < row.length or not row.sha256:
        raise ArtifactError(
            "upload_incomplete",
            f"Upload {upload_id!r} holds {row.offset} of its {row.length} bytes; send the rest "
            "(PATCH) before a tag uses it.",
            {"upload": upload_id, "offset": row.offset, "length": row.length},
        )
    blobs._claim(row.sha256, row.length)  # young again: gc_blobs leaves it until the tag commits
    content_type = row.metadata.get("contentType")
    return Taken(row.sha256, row.length, content_type, upload_id)


def upload_mark_used(taken: Taken) -> None:
    """In the tag's transaction: the upload is used, once (a second tag of it is refused)."""
    if taken.upload_id is None:
        return
    used = Upload.objects.filter(pk=taken.upload_id, used_at__isnull=True).update(
        used_at=timezone.now()
    )
    if not used:
        raise unknown_upload(taken.upload_id)


def known_contents(*, agent: Agent, sha256: str, size: int) -> Taken:
    """The blob this agent already stores with this hash and size (API.md "Known contents"), or
    409 ``contents_unknown``. Only the agent's own records and versions are asked, in one
    statement whatever other agents store, so their blobs are never found (nor timed)."""
    artifacts = Artifact.objects.filter(agent_id=agent.pk, blob_id=sha256, blob__size=size)
    versions = ArtifactVersion.objects.filter(
        artifact__agent_id=agent.pk, blob_id=sha256, blob__size=size
    )
    found = artifacts.exists() or versions.exists()
    # Young again (an UPDATE, never an insert): gc_blobs leaves it until the tag commits.
    if found and Blob.objects.filter(pk=sha256).update(created_at=timezone.now()):
        return Taken(sha256, size, None)
    raise ConflictError(
        "contents_unknown",
        "This agent stores no contents with that sha256 and size; send the bytes "
        "(contents, a multipart part, or an upload).",
        {"fields": ["contentsSha256", "contentsSize"]},
    )


# --- expiry ----------------------------------------------------------------------------------


def uploads_expire(*, now: datetime | None = None, dry_run: bool = False) -> int:
    """Remove (``dry_run``: count) the uploads past their expiry, with what they stored."""
    now = now or timezone.now()
    expired = Upload.objects.filter(expires_at__lte=now)
    if dry_run:
        return expired.count()
    store = store_for(blobs.blob_storage())
    removed = 0
    for row in list(expired):  # read first: rows are deleted as it goes
        if _lease_alive(row):
            continue
        if not Upload.objects.filter(pk=row.pk, lease=row.lease).delete()[0]:
            continue
        _forget(row.pk)
        with faults.storage_errors():
            store.discard(row)  # an unfinished upload's bytes (a finished one's are a blob)
        removed += 1
    return removed


def uploads_holding(names: list[str]) -> set[str]:
    """Which of these blobs an unused, unexpired, finished upload holds for a tag still to come
    (gc keeps them): one lookup of the list in the uploads' sha256 index, no join."""
    held = Upload.objects.filter(
        sha256__in=names, used_at__isnull=True, expires_at__gt=timezone.now(), offset=F("length")
    )
    return set(held.values_list("sha256", flat=True))


__all__ = [
    "CHECKSUMS",
    "Taken",
    "UploadState",
    "known_contents",
    "max_upload_bytes",
    "parse_checksum",
    "upload_create",
    "upload_delete",
    "upload_mark_used",
    "upload_status",
    "upload_take",
    "upload_write",
    "uploads_expire",
    "uploads_holding",
    "unknown_upload",
]
