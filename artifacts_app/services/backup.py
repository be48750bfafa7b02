"""Backups and restores of a whole deployment: the database, then the blobs its records point at.

**Order.** The database is copied first, as one consistent snapshot (SQLite's online backup API;
``pg_dump --snapshot`` of a transaction that also lists the referenced blobs), then exactly the
blobs that snapshot points at (records and kept versions) are copied from the storage. Blobs are
content-addressed and never rewritten: the bytes of a name are the same whenever they are read,
and the only thing that removes them is ``gc_blobs``, which removes only blobs no record points
at. So every blob the snapshot names is in the storage while the copy runs — unless a record of
the snapshot was deleted since and gc collected its blob meanwhile (it must also be older than
``--grace``); then the backup fails naming it, and is run again (the timers keep the two apart).
Copying the blobs first would be wrong: a tag between the two copies would leave a record in the
backup pointing at bytes it lacks.

**Layout** of a backup folder: ``manifest.json`` (format, vendor, time, counts), the database
(``database.sqlite3`` or ``database.dump``, pg_dump's custom format), ``blobs.txt`` (``<sha256>
<size>`` per blob) and ``blobs/ab/cd/<sha256>``, each file checked against its name as it is copied.

**Restore** goes into an empty database (a fresh SQLite file, or a PostgreSQL database with no
tables) of the same vendor, and any storage: the database first, then the blobs the storage lacks,
then (unless told not to) every blob is read back from the storage and hashed, and the restored
tables are counted against the manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.db import connection, connections
from django.utils import timezone

from artifacts_app import blobs
from artifacts_app.errors import ArtifactError
from artifacts_app.models import Agent, ApiKey, Artifact, ArtifactVersion, Blob, Event, Session

FORMAT = "agent-artifacts-backup/1"
CHUNK = 1024 * 1024
COUNTED = {
    "agents": Agent,
    "sessions": Session,
    "records": Artifact,
    "versions": ArtifactVersion,
    "events": Event,
    "keys": ApiKey,
    "blobRows": Blob,
}


class BackupError(ArtifactError):
    pass


@dataclass(frozen=True)
class BackupReport:
    path: Path
    vendor: str
    counts: dict[str, int]
    blobs: int
    bytes: int


@dataclass(frozen=True)
class RestoreReport:
    vendor: str
    counts: dict[str, int]
    blobs_copied: int
    blobs_present: int
    blobs_verified: int
    bytes: int


def _referenced_sql(quote: Any) -> str:
    blob = quote(Blob._meta.db_table)
    record = quote(Artifact._meta.db_table)
    version = quote(ArtifactVersion._meta.db_table)
    return (
        f"SELECT b.sha256, b.size FROM {blob} b WHERE b.sha256 IN ("
        f"SELECT blob_id FROM {record} WHERE blob_id IS NOT NULL UNION "
        f"SELECT blob_id FROM {version} WHERE blob_id IS NOT NULL) ORDER BY b.sha256"
    )


def _counts_sql(quote: Any) -> list[tuple[str, str]]:
    return [
        (name, f"SELECT COUNT(*) FROM {quote(model._meta.db_table)}")
        for name, model in COUNTED.items()
    ]


def _sqlite_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _postgres_env() -> dict[str, str]:
    """libpq's variables for pg_dump/pg_restore, from the Django connection's settings."""
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    for key, var in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER")):
        if db.get(key):
            env[var] = str(db[key])
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    env["PGDATABASE"] = str(db["NAME"])
    options = db.get("OPTIONS", {})
    if options.get("sslmode"):
        env["PGSSLMODE"] = str(options["sslmode"])
    env["PGCONNECT_TIMEOUT"] = str(options.get("connect_timeout", 10))
    return env


def _postgres_connect() -> Any:
    import psycopg

    db = settings.DATABASES["default"]
    params = {
        k: v
        for k, v in db.get("OPTIONS", {}).items()
        if k not in {"pool", "options", "server_side_binding", "cursor_factory", "isolation_level"}
    }
    return psycopg.connect(
        dbname=str(db["NAME"]),
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        host=db.get("HOST") or None,
        port=db.get("PORT") or None,
        **params,
    )


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(
            "tool_missing",
            f"{name} is not on PATH: install PostgreSQL's client programs (postgresql-client), "
            "of the server's major version or newer.",
        )
    return found


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(
            "backup_tool_failed",
            f"{Path(command[0]).name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}",
        )


def _vendor() -> str:
    return connection.vendor


def _snapshot(dest: Path) -> tuple[str, list[tuple[str, int]], dict[str, int]]:
    """The database into ``dest``; the blobs and counts of that same snapshot."""
    vendor = _vendor()
    if vendor == "sqlite":
        target = dest / "database.sqlite3"
        source = sqlite3.connect(f"file:{settings.DATABASES['default']['NAME']}?mode=ro", uri=True)
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)  # one step: a consistent snapshot, WAL included, while writers run
            refs = [(sha, int(size)) for sha, size in copy.execute(_referenced_sql(_sqlite_quote))]
            counts = {n: copy.execute(q).fetchone()[0] for n, q in _counts_sql(_sqlite_quote)}
        finally:
            copy.close()
            source.close()
        return "database.sqlite3", refs, counts
    if vendor == "postgresql":
        pg_dump = _tool("pg_dump")
        conn = _postgres_connect()
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]
            quote = connection.ops.quote_name
            refs = [(sha, int(size)) for sha, size in conn.execute(_referenced_sql(quote))]
            counts = {n: conn.execute(q).fetchone()[0] for n, q in _counts_sql(quote)}
            # pg_dump reads the very snapshot the lists above were read in, while it is held open.
            _run(
                [
                    pg_dump,
                    "--format=custom",
                    f"--snapshot={snapshot}",
                    "--file",
                    str(dest / "database.dump"),
                ],
                _postgres_env(),
            )
            conn.execute("COMMIT")
        finally:
            conn.close()
        return "database.dump", refs, counts
    raise BackupError("backup_unsupported", f"No backup for a {vendor} database.")


def _copy_hashed(source: Any, target: Path, sha: str, size: int) -> None:
    digest = hashlib.sha256()
    written = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with open(partial, "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
            written += len(chunk)
    if digest.hexdigest() != sha or written != size:
        partial.unlink()
        raise BackupError(
            "blob_corrupt",
            f"The stored blob {sha} reads back as {written} bytes with sha256 "
            f"{digest.hexdigest()}: the storage holds damaged bytes for it.",
        )
    os.replace(partial, target)


def backup(dest: Path) -> BackupReport:
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise BackupError("backup_exists", f"{dest} is not empty: back up into a new folder.")
    dest.mkdir(parents=True, exist_ok=True)
    started = timezone.now()
    database, refs, counts = _snapshot(dest)
    total = 0
    for sha, size in refs:
        try:
            source = blobs.blob_open(sha)
        except Exception as exc:
            raise BackupError(
                "backup_blob_missing",
                f"The blob {sha}, which the database snapshot points at, is not in the storage "
                f"({type(exc).__name__}): was gc_blobs running during the backup? Run the backup "
                "again, apart from gc_blobs.",
            ) from exc
        with source:
            _copy_hashed(source, dest / "blobs" / blobs.blob_name(sha), sha, size)
        total += size
    (dest / "blobs.txt").write_text("".join(f"{sha} {size}\n" for sha, size in refs))
    vendor = _vendor()
    manifest = {
        "format": FORMAT,
        "vendor": vendor,
        "database": database,
        "startedAt": started.isoformat(),
        "finishedAt": timezone.now().isoformat(),
        "counts": counts,
        "blobs": len(refs),
        "bytes": total,
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return BackupReport(dest, vendor, counts, len(refs), total)


def _blob_lines(source: Path) -> Iterator[tuple[str, int]]:
    for line in (source / "blobs.txt").read_text().splitlines():
        sha, size = line.split()
        yield sha, int(size)


def _database_is_empty() -> bool:
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
    return Artifact._meta.db_table not in tables and "django_migrations" not in tables


def restore(source: Path, *, verify: bool = True) -> RestoreReport:
    source = Path(source)
    try:
        manifest = json.loads((source / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(
            "backup_unreadable", f"{source} holds no readable manifest.json ({exc})."
        ) from None
    if manifest.get("format") != FORMAT:
        raise BackupError(
            "backup_unreadable", f"{source} is not a backup of this format ({FORMAT})."
        )
    vendor = _vendor()
    if manifest["vendor"] != vendor:
        raise BackupError(
            "restore_mismatch",
            f"The backup is of a {manifest['vendor']} database; DATABASE_URL names a {vendor} one.",
        )
    if not _database_is_empty():
        raise BackupError(
            "restore_not_empty",
            "The database has tables already: restore into a new, empty database.",
        )
    if vendor == "sqlite":
        connections.close_all()
        target = settings.DATABASES["default"]["NAME"]
        backup_file = sqlite3.connect(f"file:{source / manifest['database']}?mode=ro", uri=True)
        restored = sqlite3.connect(target)
        try:
            backup_file.backup(restored)
        finally:
            restored.close()
            backup_file.close()
    else:
        connections.close_all()
        _run(
            [
                _tool("pg_restore"),
                "--no-owner",
                "--no-privileges",
                "--exit-on-error",
                "--single-transaction",
                "--dbname",
                _postgres_env()["PGDATABASE"],
                str(source / manifest["database"]),
            ],
            _postgres_env(),
        )
    storage = blobs.blob_storage()
    copied = present = 0
    for sha, size in _blob_lines(source):
        name = blobs.blob_name(sha)
        if storage.exists(name) and storage.size(name) == size:
            present += 1
            continue
        path = source / "blobs" / name
        upload_path = getattr(storage, "upload_path", None)  # S3 (agent_site/s3.py)
        if callable(upload_path):
            upload_path(name, str(path))
        else:
            with open(path, "rb") as fh:
                saved = storage.save(name, File(fh, name=name))
            if saved != name:
                raise BackupError("restore_failed", f"The storage saved {name} as {saved}.")
        copied += 1
    verified = total = 0
    counts = {}
    if verify:
        for sha, size in _blob_lines(source):
            with blobs.blob_open(sha) as fh:
                digest = hashlib.sha256()
                read = 0
                while chunk := fh.read(CHUNK):
                    digest.update(chunk)
                    read += len(chunk)
            if digest.hexdigest() != sha or read != size:
                raise BackupError(
                    "restore_failed", f"The restored blob {sha} reads back wrong ({read} bytes)."
                )
            verified += 1
            total += size
        with connection.cursor() as cursor:
            for name, query in _counts_sql(connection.ops.quote_name):
                cursor.execute(query)
                counts[name] = cursor.fetchone()[0]
        if counts != manifest["counts"]:
            raise BackupError(
                "restore_failed",
                f"The restored database counts {counts}; the backup holds {manifest['counts']}.",
            )
    return RestoreReport(vendor, counts, copied, present, verified, total)
