"""The versions migration (0003 schema, 0004 backfill): every stored record becomes version 1 of
itself, in batches, on a copy of a database that main made before versions existed."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from artifacts_app import services
from artifacts_app.models import Artifact, ArtifactVersion
from tests.plans import explain, records_analysed_as_empty

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "main-9be6ed7.sqlite3"
ROOT = Path(__file__).resolve().parents[2]
COPIED = ("kind", "title", "data", "session_id", "turn_id", "source", "blob_id", "content_type")


def _migrate(db: Path, data_dir: Path, *target: str) -> str:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "ARTIFACTS_STORAGE")
    }
    env.update(
        DATABASE_URL=f"sqlite:///{db}",
        ARTIFACTS_DATA_DIR=str(data_dir),
        PYTHONDONTWRITEBYTECODE="1",
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", *target, "--no-input", "-v", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_database_made_by_main_migrates_every_record_to_its_version_1(tmp_path):
    db = tmp_path / "copy.sqlite3"
    shutil.copyfile(FIXTURE, db)
    with sqlite3.connect(db) as raw:
        before = raw.execute(
            f"SELECT id, {', '.join(COPIED)}, updated_at FROM artifacts_app_artifact ORDER BY id"
        ).fetchall()
    assert len(before) == 55

    # Up to the backfill only: the resume below unapplies it, which a later migration applied
    # after it would make an inconsistent history.
    out = _migrate(db, tmp_path, "artifacts_app", "0004_versions_backfill")
    assert "0003_versions" in out and "0004_versions_backfill" in out

    with sqlite3.connect(db) as raw:
        after = raw.execute(
            f"SELECT id, {', '.join(COPIED)}, updated_at FROM artifacts_app_artifact ORDER BY id"
        ).fetchall()
        assert after == before  # the records themselves are untouched
        assert raw.execute(
            "SELECT count(*) FROM artifacts_app_artifact WHERE version <> 1 OR pinned"
        ).fetchone() == (0,)
        versions = raw.execute(
            f"SELECT artifact_id, {', '.join(COPIED)}, created_at FROM artifacts_app_artifactversion "
            "WHERE number = 1 ORDER BY artifact_id"
        ).fetchall()
        assert versions == before  # version 1 holds exactly what the record holds
        assert raw.execute("SELECT count(*) FROM artifacts_app_artifactversion").fetchone() == (55,)
        assert (
            raw.execute("SELECT keep_versions FROM artifacts_app_agent").fetchall()
            == [(10,)] * raw.execute("SELECT count(*) FROM artifacts_app_agent").fetchone()[0]
        )
        with_content = raw.execute(
            "SELECT count(*) FROM artifacts_app_artifactversion WHERE blob_id IS NOT NULL"
        ).fetchone()[0]
        assert with_content == 10

    # Run again (an interrupted run resumed): nothing is copied twice.
    with sqlite3.connect(db) as raw:
        raw.execute(
            "DELETE FROM django_migrations WHERE app = 'artifacts_app' AND name = '0004_versions_backfill'"
        )
    _migrate(db, tmp_path, "artifacts_app", "0004_versions_backfill")
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM artifacts_app_artifactversion").fetchone() == (55,)
    _migrate(db, tmp_path)  # and every later migration on top
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM artifacts_app_artifactversion").fetchone() == (55,)
        assert raw.execute(
            "SELECT count(*) FROM artifacts_app_agent WHERE kinds_hash <> ''"
        ).fetchone() == (0,)


class _Editor:
    """What the RunPython function needs of a schema editor: its connection."""

    connection = connection


def _backfill(batch: int) -> int:
    from importlib import import_module

    module = import_module("artifacts_app.migrations.0004_versions_backfill")
    return module.backfill(django_apps, _Editor(), batch=batch)


def test_backfill_goes_in_batches_and_skips_records_that_have_a_version(freeform):
    ids = [
        services.artifact_tag(agent=freeform, key=f"k{i}", data={"i": i}).record.id
        for i in range(11)
    ]
    services.artifact_tag(agent=freeform, key="k0", data={"i": "again"})  # k0 has versions 1, 2
    # Records as the old schema left them: no versions at all, except k0's.
    ArtifactVersion.objects.exclude(artifact_id=ids[0]).delete()
    Artifact.objects.filter(pk__in=ids[1:]).update(updated_at=timezone.now())
    assert _backfill(batch=3) == 10  # 4 batches of 3 ids, the last short
    for artifact_id in ids[1:]:
        row = Artifact.objects.values("kind", "data", "updated_at").get(pk=artifact_id)
        version = ArtifactVersion.objects.values("number", "kind", "data", "created_at").get(
            artifact_id=artifact_id
        )
        assert version == {
            "number": 1,
            "kind": row["kind"],
            "data": row["data"],
            "created_at": row["updated_at"],
        }
    assert sorted(
        ArtifactVersion.objects.filter(artifact_id=ids[0]).values_list("number", flat=True)
    ) == [1, 2]
    assert _backfill(batch=3) == 0  # resumable: a second run copies nothing
    assert _backfill(batch=1000) == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_backfill_of_200k_records_keeps_memory_flat():
    import psutil

    from tests.commands.test_prune_large import N, bulk_insert

    agent = services.agent_create(slug="backfill-200k", max_artifacts=N + 10)
    session = services.session_create(agent=agent, sid="big-session")
    bulk_insert(agent.pk, session.pk)  # rows written by SQL, with no versions
    assert ArtifactVersion.objects.count() == 0
    process = psutil.Process()
    baseline = process.memory_info().rss
    assert _backfill(batch=1000) == N
    grown = process.memory_info().rss - baseline
    # 200,000 records as Python rows would be hundreds of MiB; a batch of ids is nothing.
    assert grown < 30 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"
    assert ArtifactVersion.objects.filter(number=1).count() == N


@pytest.mark.scale
@pytest.mark.django_db(transaction=True)
def test_backfill_never_reads_the_versions_table_whatever_its_statistics():
    """PostgreSQL plans from statistics: analysed while it held only rolled-back rows, the versions
    table reads as empty at any size. A batch that looked versions up by a join then scanned the
    whole table once per record (the CI's 200k backfill ran past its 300 s); the skip is a
    conflict on the unique index, so no batch's plan reads versions at all."""
    from tests.commands.test_prune_large import bulk_insert

    records_analysed_as_empty()
    table = ArtifactVersion._meta.db_table

    agent = services.agent_create(slug="backfill-stats", max_artifacts=10_000)
    bulk_insert(agent.pk, services.session_create(agent=agent, sid="s").pk, count=3_000)
    with CaptureQueriesContext(connection) as queries:
        assert _backfill(batch=500) == 3_000
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 7  # six full batches and the open-ended last one
    for sql in inserts:
        plan = explain(sql)
        scans = [line for line in plan.splitlines() if table in line and "Insert on" not in line]
        assert scans == [], plan
    assert ArtifactVersion.objects.filter(number=1).count() == 3_000
