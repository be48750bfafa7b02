"""gc_blobs: grace, dry-run, and never the blob of a tag that commits during the run."""

from __future__ import annotations

import io
import os
import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from artifacts_app import blobs, services
from artifacts_app.models import Artifact, Blob
from tests.plans import explain, records_analysed_as_empty


def gc(*args: str) -> str:
    out = io.StringIO()
    call_command("gc_blobs", *args, stdout=out)
    return out.getvalue()


def age(sha: str, hours: float = 2) -> None:
    Blob.objects.filter(pk=sha).update(created_at=timezone.now() - timedelta(hours=hours))


def orphan(agent, key: str, contents: bytes) -> str:
    record = services.artifact_tag(agent=agent, key=key, data={}, contents=contents).record
    services.artifact_delete(agent=agent, artifact_id=record.id)
    return record.content.sha256


def test_dry_run_changes_nothing_and_reports_what_a_real_run_removes(db):
    agent = services.agent_create(slug="gc-dry", max_artifacts=100)
    old_a = orphan(agent, "a", b"old orphan A")
    old_b = orphan(agent, "b", b"old orphan B, longer")
    young = orphan(agent, "c", b"young orphan")
    kept = services.artifact_tag(agent=agent, key="k", data={}, contents=b"referenced").record
    for sha in (old_a, old_b, kept.content.sha256):
        age(sha)
    assert "Would remove 2 blob(s), 32 bytes" in gc("--dry-run")
    assert all(blobs.blob_exists(s) for s in (old_a, old_b, young, kept.content.sha256))
    assert Blob.objects.count() == 4
    assert "Removed 2 blob(s), 32 bytes" in gc()
    assert not blobs.blob_exists(old_a) and not blobs.blob_exists(old_b)
    assert set(Blob.objects.values_list("sha256", flat=True)) == {young, kept.content.sha256}
    assert blobs.blob_read(kept.content.sha256) == b"referenced"
    # A shorter grace takes the young one too; the referenced one stays whatever the grace.
    assert "Removed 1 blob(s)" in gc("--grace", "0s")
    assert list(Blob.objects.values_list("sha256", flat=True)) == [kept.content.sha256]


def test_stray_files_without_a_row_are_adopted_and_removed_after_the_grace(db, settings):
    if not settings.STORAGES["artifacts"]["BACKEND"].endswith("FileSystemStorage"):
        pytest.skip("dating a file by hand needs local storage; S3 sets its own modification time")
    stored = blobs.blob_put(b"written, then the tag crashed")
    Blob.objects.filter(pk=stored.sha256).delete()  # as if the row had never been made
    path = blobs.blob_storage().path(blobs.blob_name(stored.sha256))
    assert "Would remove 0 blob(s)" in gc("--dry-run")  # younger than the grace
    old = time.time() - 7200
    os.utime(path, (old, old))
    assert "Would remove 1 blob(s), 29 bytes (1 of them in storage without a row)" in gc(
        "--dry-run"
    )
    assert os.path.exists(path) and not Blob.objects.exists()
    assert "Removed 1 blob(s)" in gc()
    assert not os.path.exists(path) and not Blob.objects.exists()


def test_never_removes_the_blob_of_a_tag_committed_during_its_run(db):
    agent = services.agent_create(slug="gc-race", max_artifacts=100)
    shas = [orphan(agent, f"o{i}", f"contents {i}".encode()) for i in range(4)]
    for sha in shas:
        age(sha)

    def retag(sha: str) -> None:
        # Between gc listing this orphan and taking it, a tag stores the same bytes and commits.
        i = shas.index(sha)
        if i % 2 == 0:
            services.artifact_tag(agent=agent, key=f"again{i}", data={}, contents=f"contents {i}")

    report = services.blobs_collect(grace=timedelta(hours=1), before_each=retag)
    assert (report.removed, report.kept) == (2, 2)
    for i, sha in enumerate(shas):
        assert blobs.blob_exists(sha) == (i % 2 == 0)
    for record in Artifact.objects.filter(agent=agent):
        assert blobs.blob_read(record.blob_id) == f"contents {record.key[-1]}".encode()


@pytest.mark.django_db(transaction=True)
def test_concurrent_tags_and_gc_never_lose_a_committed_blob():
    """Real threads: one keeps re-storing old orphans' bytes, the other collects in a loop."""
    agent = services.agent_create(slug="gc-threads", max_artifacts=1000)
    contents = [f"shared bytes {i}".encode() for i in range(20)]
    shas = [orphan(agent, f"seed{i}", c) for i, c in enumerate(contents)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def tagger() -> None:
        try:
            n = 0
            while not stop.is_set() and n < 200:
                Blob.objects.filter(sha256__in=shas).update(
                    created_at=timezone.now() - timedelta(hours=2)
                )
                services.artifact_tag(agent=agent, key=f"k{n}", data={}, contents=contents[n % 20])
                n += 1
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def collector() -> None:
        try:
            while not stop.is_set():
                services.blobs_collect(grace=timedelta(hours=1))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=tagger), threading.Thread(target=collector)]
    for thread in threads:
        thread.start()
    threads[0].join(120)
    stop.set()
    threads[1].join(120)
    assert errors == []
    for sha in Artifact.objects.filter(agent=agent).values_list("blob_id", flat=True):
        assert blobs.blob_exists(sha), sha


def test_bad_grace_refuses_with_a_sentence(db):
    with pytest.raises(CommandError, match="--grace takes a duration"):
        gc("--grace", "a while")


def test_temporary_files_of_unfinished_uploads_go_after_the_grace(db, settings, tmp_path):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "tmp")
    incoming = blobs._temp_dir(blobs.blob_storage())  # beside local storage, or the tmp dir
    spool = blobs._temp_dir_of_spool()
    two_hours_ago = time.time() - 7200
    old = [os.path.join(incoming, "blob-crashed"), os.path.join(spool, "tmpab12.upload.bin")]
    young = os.path.join(incoming, "blob-uploading")
    other = os.path.join(spool, "not-ours")
    for path in [*old, young, other]:
        with open(path, "wb") as fh:
            fh.write(b"12345")
    for path in [*old, other]:
        os.utime(path, (two_hours_ago, two_hours_ago))

    assert "and 2 temporary file(s) of unfinished uploads, 10 bytes" in gc("--dry-run")
    assert all(os.path.exists(p) for p in old)
    assert "removed 2 temporary file(s) of unfinished uploads, 10 bytes" in gc()
    assert not any(os.path.exists(p) for p in old)
    assert os.path.exists(young) and os.path.exists(other)  # in progress; not ours


def test_candidates_are_the_old_unreferenced_rows_across_batches(db, monkeypatch):
    from artifacts_app.services import blobs as blobgc

    monkeypatch.setattr(blobgc, "BATCH_SIZE", 3)  # the rows below span several batches
    agent = services.agent_create(slug="gc-batches", max_artifacts=100)
    first = services.artifact_tag(agent=agent, key="r", data={}, contents=b"version 1").record
    in_a_version = first.content.sha256  # only version 1 points at it after the re-tag
    current = services.artifact_tag(agent=agent, key="r", data={}, contents=b"version 2").record
    orphans = {orphan(agent, f"o{i}", f"orphan {i}".encode()) for i in range(7)}
    young = orphan(agent, "young", b"young orphan")
    for sha in (in_a_version, current.content.sha256, *orphans):
        age(sha)
    cutoff = timezone.now() - timedelta(hours=1)
    assert {sha for sha, _ in blobgc._candidates(cutoff)} == orphans
    assert young not in orphans and Blob.objects.count() == 10


@pytest.mark.scale
@pytest.mark.django_db(transaction=True)
def test_candidates_never_join_whatever_the_statistics():
    """With statistics that read the artifact and version tables as empty (analysed while they
    held only rolled-back rows), PostgreSQL planned the old anti-joins from them (seen: a nested
    loop walking the versions' whole blob index once per candidate); a lookup by a list of names
    has no join to plan badly."""
    from django.test.utils import CaptureQueriesContext

    from artifacts_app.services import blobs as blobgc

    records_analysed_as_empty()
    agent = services.agent_create(slug="gc-stats", max_artifacts=1000)
    kept = services.artifact_tag(agent=agent, key="kept", data={}, contents=b"kept").record
    gone = orphan(agent, "gone", b"gone")
    for sha in (kept.content.sha256, gone):
        age(sha)
    with CaptureQueriesContext(connection) as queries:
        found = [sha for sha, _ in blobgc._candidates(timezone.now() - timedelta(hours=1))]
    assert found == [gone]
    selects = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    for sql in selects:
        plan = explain(sql)
        assert "Join" not in plan, plan
    assert len(selects) == 5  # a batch, its lookups (records, versions, uploads), the empty batch
