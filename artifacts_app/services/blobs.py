"""Blob collection (API.md ``gc_blobs``): remove stored bytes no record and no kept version points
at, past a grace.

Why it is safe while tags run — the claim protocol:

1. A tag stores its bytes with ``blobs.blob_put``. Once the hash is known and *before* it asks the
   storage whether those bytes are there already, it **claims** the blob: it inserts the ``Blob``
   row, or moves an existing row's ``created_at`` to now (``blobs._claim``, committed at once).
   Then the tag's transaction points its record at the blob.
2. ``gc_blobs`` lists candidates (rows older than the grace that no record points at), then takes
   each one in its own transaction: it **locks** the row (``SELECT … FOR UPDATE`` on PostgreSQL;
   SQLite's IMMEDIATE transaction holds the write lock), **re-checks** in fresh statements that the
   row is still older than the grace and still unreferenced, deletes the bytes from storage, deletes
   the row, and commits.

A tag that claimed before the lock has made the row young: the re-check keeps it. A tag that claims
while gc holds the lock waits on the row; when it goes on, the row is gone, the storage no longer
has the bytes, and the tag writes them again. A record committed meanwhile is seen by the re-check
(PostgreSQL's foreign key check also takes a share lock that conflicts with gc's row lock). So gc
never removes the blob of a tag that commits during its run, provided a tag commits within the
grace of its claim — the grace (default 1 hour) must be longer than the slowest tag's upload to
storage plus its transaction.

Bytes in storage with no row at all (left by a crash before the claim, or by an older version) are
adopted first: given a row dated by the file's modification time, then treated like the rest.
Temporary files of uploads that never finished (a process killed mid-upload) are removed first,
when last written longer ago than the grace (``blobs.temp_files_sweep``), and so are resumable
uploads past ``ARTIFACTS_UPLOAD_EXPIRY`` (``uploads.uploads_expire``); a finished upload that no
tag has used yet holds its blob until it expires.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from artifacts_app import blobs  # the storage layer; this module is the collection service
from artifacts_app.models import Artifact, ArtifactVersion, Blob
from artifacts_app.services.uploads import uploads_expire, uploads_holding

SHA_RE = re.compile(r"[0-9a-f]{64}")
BATCH_SIZE = 500


@dataclass
class GcReport:
    dry_run: bool
    removed: int = 0
    bytes: int = 0
    kept: int = 0  # candidates a tag claimed or referenced before gc could take them
    adopted: int = 0  # files in storage that had no row
    temp_removed: int = 0  # temporary files of uploads that never finished (a crash, a kill)
    temp_bytes: int = 0
    uploads_removed: int = 0  # resumable uploads past ARTIFACTS_UPLOAD_EXPIRY


def _stored_names() -> Iterator[str]:
    """Every blob hash in the storage (``ab/cd/<sha>``), skipping anything else."""
    storage = blobs.blob_storage()
    try:
        tops, _ = storage.listdir("")
    except FileNotFoundError:
        return
    for top in sorted(tops):
        if len(top) != 2:
            continue
        try:
            subs, _ = storage.listdir(top)
        except FileNotFoundError:
            continue
        for sub in sorted(subs):
            try:
                _, files = storage.listdir(f"{top}/{sub}")
            except FileNotFoundError:
                continue
            for name in files:
                if SHA_RE.fullmatch(name) and name.startswith(top + sub):
                    yield name


def _adopt_strays(cutoff: datetime, *, dry_run: bool) -> tuple[int, int]:
    storage = blobs.blob_storage()
    adopted = 0
    adopted_bytes = 0
    batch: list[str] = []

    def flush() -> None:
        nonlocal adopted, adopted_bytes
        known = set(Blob.objects.filter(sha256__in=batch).values_list("sha256", flat=True))
        for sha in batch:
            if sha in known:
                continue
            name = blobs.blob_name(sha)
            try:
                modified = storage.get_modified_time(name)
                size = storage.size(name)
            except (FileNotFoundError, OSError):
                continue
            if timezone.is_naive(modified):
                modified = modified.replace(tzinfo=UTC)
            if modified >= cutoff:
                continue
            adopted += 1
            adopted_bytes += size
            if not dry_run:
                # DO NOTHING: a tag that claimed it meanwhile keeps its young row.
                Blob.objects.bulk_create(
                    [Blob(sha256=sha, size=size, created_at=modified)], ignore_conflicts=True
                )
        batch.clear()

    for sha in _stored_names():
        batch.append(sha)
        if len(batch) >= BATCH_SIZE:
            flush()
    if batch:
        flush()
    return adopted, adopted_bytes


def _candidates(cutoff: datetime) -> Iterator[tuple[str, int]]:
    """Rows older than ``cutoff`` that no record and no version points at, in sha256 order.

    A batch of old rows, then which of them are pointed at, by two lookups of that list in the
    tables' blob indexes — not one anti-join: PostgreSQL plans an anti-join from the tables'
    statistics, and with statistics that read a table as empty (analysed while it held only
    rolled-back rows) it walked the whole blob index once per candidate (docs/architecture.md,
    the versions migration). A lookup by a list cannot become that."""
    old = Blob.objects.filter(created_at__lt=cutoff).order_by("sha256")
    position = ""
    while True:
        rows = list(old.filter(sha256__gt=position).values_list("sha256", "size")[:BATCH_SIZE])
        if not rows:
            return
        names = [sha for sha, _ in rows]
        used: set[str] = set()
        for model in (Artifact, ArtifactVersion):
            # DISTINCT: a common blob (an empty file) may be pointed at by a million rows.
            pointed = model.objects.filter(blob_id__in=names).values_list("blob_id", flat=True)
            used.update(pointed.distinct())
        used.update(uploads_holding(names))  # finished uploads waiting for their tag
        yield from (row for row in rows if row[0] not in used)
        position = rows[-1][0]


def blob_collect_one(sha256: str, cutoff: datetime) -> int | None:
    """Remove one blob if, under its row lock, it is still older than ``cutoff`` and unreferenced.

    Answers its size when removed, None when a tag claimed or used it meanwhile.
    """
    with transaction.atomic():
        rows = list(
            Blob.objects.select_for_update().filter(pk=sha256).values_list("size", flat=True)
        )
        if not rows:
            return None
        # Fresh statements (a new snapshot under READ COMMITTED) after the lock is held.
        if not Blob.objects.filter(pk=sha256, created_at__lt=cutoff).exists():
            return None
        if Artifact.objects.filter(blob_id=sha256).exists():
            return None
        if ArtifactVersion.objects.filter(blob_id=sha256).exists():
            return None  # an older version still points at it
        if uploads_holding([sha256]):
            return None  # a finished upload waits for its tag
        blobs.blob_delete(sha256)
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {connection.ops.quote_name(Blob._meta.db_table)} WHERE sha256 = %s",
                [sha256],
            )
        return rows[0]


def blobs_collect(
    *,
    grace: timedelta,
    dry_run: bool = False,
    before_each: Callable[[str], None] | None = None,
) -> GcReport:
    """Remove (``dry_run``: count) blobs that no record points at and older than ``grace``.

    ``before_each(sha)`` runs between listing a candidate and taking it (tests use it to race).
    """
    cutoff = timezone.now() - grace
    report = GcReport(dry_run=dry_run)
    report.uploads_removed = uploads_expire(dry_run=dry_run)
    swept = blobs.temp_files_sweep(older_than=cutoff.timestamp(), dry_run=dry_run)
    report.temp_removed, report.temp_bytes = swept.removed, swept.bytes
    report.adopted, adopted_bytes = _adopt_strays(cutoff, dry_run=dry_run)
    if dry_run:
        # Strays get their row only in a real run; count them here as that run would.
        report.removed, report.bytes = report.adopted, adopted_bytes
        for _sha, size in _candidates(cutoff):
            report.removed += 1
            report.bytes += size
        return report
    for sha, _size in _candidates(cutoff):
        if before_each is not None:
            before_each(sha)
        collected = blob_collect_one(sha, cutoff)
        if collected is None:
            report.kept += 1
        else:
            report.removed += 1
            report.bytes += collected
    return report
