"""manage.py backup / restore: the database's snapshot first, then the blobs it points at; a restore
into an empty database and another storage gives back every record and every byte, even when the
backup ran while tags were committing."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from artifacts_app import blobs, services
from artifacts_app.models import Artifact

ROOT = Path(__file__).resolve().parents[2]

LIST_RECORDS = """
import hashlib, json
from artifacts_app import blobs
from artifacts_app.models import Artifact, ArtifactVersion
out = {}
for record in Artifact.objects.order_by("id"):
    sha = record.blob_id
    read = hashlib.sha256(blobs.blob_read(sha)).hexdigest() if sha else None
    out[record.id] = [record.key, record.data, sha, read]
print(json.dumps({"records": out, "versions": ArtifactVersion.objects.count()}))
"""


@pytest.fixture
def restore_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An empty database and an empty storage of the same kinds as the test's (dropped after)."""
    name = None
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["ARTIFACTS_DATA_DIR"] = str(tmp_path / "restored")
    env["DJANGO_SETTINGS_MODULE"] = "agent_site.settings"
    env["PYTHONPATH"] = str(ROOT)
    if connection.vendor == "postgresql":
        db = settings.DATABASES["default"]
        name = f"restore_{uuid.uuid4().hex[:12]}"
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        env["DATABASE_URL"] = f"postgres://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{name}"
    else:
        env.pop("DATABASE_URL", None)
    if env.get("ARTIFACTS_STORAGE") == "s3":
        env["ARTIFACTS_S3_PREFIX"] = f"restored-{uuid.uuid4().hex[:12]}"
    yield env
    if name is not None:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def live_records() -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for record in Artifact.objects.order_by("id"):
        sha = record.blob_id
        read = hashlib.sha256(blobs.blob_read(sha)).hexdigest() if sha else None
        out[record.id] = [record.key, record.data, sha, read]
    return out


@pytest.mark.django_db(transaction=True)
def test_a_backup_taken_while_tags_commit_restores_every_record_and_byte(tmp_path, restore_env):
    agent = services.agent_create(slug="backed", max_artifacts=10_000)
    for i in range(20):
        services.artifact_tag(
            agent=agent, key=f"k{i}", data={"i": i}, contents=f"contents {i}".encode() * (i + 1)
        )
    # A re-tag makes a second version whose blob only the version keeps.
    services.artifact_tag(agent=agent, key="k0", data={"i": 0, "again": True}, contents=b"v2")
    stop = threading.Event()
    tagged: list[str] = []

    def tag_meanwhile() -> None:
        i = 0
        try:
            while not stop.is_set():
                services.artifact_tag(
                    agent=agent, key=f"live{i}", data={"live": i}, contents=os.urandom(4096)
                )
                tagged.append(f"live{i}")
                i += 1
        finally:
            connection.close()

    thread = threading.Thread(target=tag_meanwhile)
    thread.start()
    while not tagged:  # the backup starts with tags committing around it
        stop.wait(0.01)
    dest = tmp_path / "backup"
    try:
        out = io.StringIO()
        call_command("backup", str(dest), stdout=out)
    finally:
        stop.set()
        thread.join()
    assert "Backed up the" in out.getvalue()
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["vendor"] == connection.vendor
    assert manifest["counts"]["records"] >= 20
    listed = (dest / "blobs.txt").read_text().split("\n")[:-1]
    assert len(listed) == manifest["blobs"] >= 22  # 20 records, k0's first version, a live tag
    for line in listed:
        sha, size = line.split()
        copy = dest / "blobs" / blobs.blob_name(sha)
        assert copy.stat().st_size == int(size)
        assert hashlib.sha256(copy.read_bytes()).hexdigest() == sha

    env = restore_env
    restored = manage(env, "restore", str(dest))
    assert restored.returncode == 0, restored.stderr
    assert f"verified {manifest['blobs']} blob(s)" in restored.stdout
    shown = manage(env, "shell", "-c", LIST_RECORDS)
    assert shown.returncode == 0, shown.stderr
    after = json.loads(shown.stdout.strip().splitlines()[-1])
    assert after["versions"] == manifest["counts"]["versions"]
    # Every record of the snapshot is back with its data, and each content reads back as its hash;
    # the snapshot is a moment of the live store: the records then, and none half-written.
    now = live_records()
    assert len(after["records"]) == manifest["counts"]["records"]
    for record_id, (key, data, sha, read) in after["records"].items():
        assert read == sha
        if not key.startswith("live") and key != "k0":
            assert now[record_id] == [key, data, sha, read]
    assert {k for k, *_ in after["records"].values() if k.startswith("live")} <= set(tagged)
    # The restored store serves: migrate finds nothing to do and a tag goes on from there.
    migrated = manage(env, "migrate", "--noinput")
    assert migrated.returncode == 0 and "No migrations to apply" in migrated.stdout


@pytest.mark.django_db(transaction=True)
def test_restore_refuses_a_database_that_has_tables(tmp_path):
    agent = services.agent_create(slug="backed-twice", max_artifacts=10)
    services.artifact_tag(agent=agent, key="a", data={}, contents=b"a")
    call_command("backup", str(tmp_path / "b"), stdout=io.StringIO())
    before = Artifact.objects.count()
    with pytest.raises(CommandError, match="restore into a new, empty database"):
        call_command("restore", str(tmp_path / "b"), stdout=io.StringIO())
    assert Artifact.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_backup_refuses_a_folder_that_holds_something(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    with pytest.raises(CommandError, match="not empty"):
        call_command("backup", str(tmp_path / "used"), stdout=io.StringIO())
    assert os.listdir(tmp_path / "used") == ["x"]


@pytest.mark.django_db(transaction=True)
def test_a_blob_gone_from_the_storage_fails_the_backup_with_the_reason(tmp_path):
    agent = services.agent_create(slug="backed-gone", max_artifacts=10)
    record = services.artifact_tag(agent=agent, key="a", data={}, contents=b"soon gone").record
    blobs.blob_delete(record.content.sha256)
    with pytest.raises(CommandError, match="gc_blobs"):
        call_command("backup", str(tmp_path / "b"), stdout=io.StringIO())


def test_restore_refuses_a_folder_that_is_no_backup(tmp_path, db):
    (tmp_path / "manifest.json").write_text('{"format": "something else"}')
    with pytest.raises(CommandError, match="not a backup of this format"):
        call_command("restore", str(tmp_path), stdout=io.StringIO())
    with pytest.raises(CommandError, match="no readable manifest.json"):
        call_command("restore", str(tmp_path / "nowhere"), stdout=io.StringIO())
