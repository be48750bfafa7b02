"""A full or read-only blob store: 507 / 503 with the envelope, nothing stored,
no temporary file left, the rest of the API serving; ``/healthz`` says which. Real faults: a
4 MiB tmpfs mounted for the test and filled, a read-only mount."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from artifacts_app import services
from artifacts_app.blobs import blob_read
from artifacts_app.models import Artifact
from tests.faults.conftest import HEALTH_TOKEN, fill

LOCAL = "django.core.files.storage.FileSystemStorage"


def use_local_storage(settings, root: Path) -> None:
    storages = {name: dict(conf) for name, conf in settings.STORAGES.items()}
    storages["artifacts"] = {"BACKEND": LOCAL, "OPTIONS": {"location": root / "blobs"}}
    settings.STORAGES = storages
    settings.FILE_UPLOAD_TEMP_DIR = str(root / "tmp")


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("blob-*"))


@pytest.fixture
def agent_client(reviewer) -> Client:
    _, key = services.agent_key_create(agent=reviewer)
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def multipart_tag(client: Client, key: str, blob: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    record = json.dumps({"kind": "report", "key": key, "data": {"n": 1}})
    upload = SimpleUploadedFile("r.bin", blob, content_type="application/octet-stream")
    return client.post("/reviewer/v1/artifacts", {"record": record, "contents": upload})


def assert_envelope(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == code
    assert int(response["Retry-After"]) > 0


def test_an_upload_larger_than_the_room_left_answers_507_and_keeps_nothing(
    settings, small_disk, agent_client
):
    use_local_storage(settings, small_disk)
    response = multipart_tag(agent_client, "big", b"x" * (6 * 1024 * 1024))  # the disk is 4 MiB
    assert_envelope(response, 507, "storage_full")
    assert "full" in response.json()["error"]["message"]
    assert Artifact.objects.count() == 0
    assert leftovers(small_disk) == []
    # Other routes are fine, and a tag that fits is stored.
    assert agent_client.get("/reviewer/v1/artifacts").status_code == 200
    small = multipart_tag(agent_client, "small", b"y" * 1024)
    assert small.status_code == 201, small.content
    assert leftovers(small_disk) == []


def test_a_full_disk_refuses_every_blob_write_path_with_507(settings, small_disk, agent_client):
    use_local_storage(settings, small_disk)
    kept = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "kept", "data": {}, "contents": "old content"},
        content_type="application/json",
    )
    assert kept.status_code == 201
    record = kept.json()
    fill(small_disk)

    json_tag = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "new", "data": {}, "contents": "z" * 10_000},
        content_type="application/json",
    )
    assert_envelope(json_tag, 507, "storage_full")
    assert_envelope(multipart_tag(agent_client, "new", b"w" * 100_000), 507, "storage_full")
    put = agent_client.put(
        f"/reviewer/v1/artifacts/{record['id']}/content",
        b"new bytes" * 10_000,
        content_type="text/plain",
    )
    assert_envelope(put, 507, "storage_full")

    # Nothing was made or changed; the old content is served; no temporary file is left.
    assert list(Artifact.objects.values_list("key", flat=True)) == ["kept"]
    content = agent_client.get(f"/reviewer/v1/artifacts/{record['id']}/content")
    assert content.status_code == 200 and content["ETag"] == f'"{record["content"]["sha256"]}"'
    assert blob_read(record["content"]["sha256"]) == b"old content"
    assert agent_client.get(f"/reviewer/v1/artifacts/{record['id']}").json()["version"] == 1
    assert leftovers(small_disk) == []
    # A tag without content needs no storage.
    plain = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "plain", "data": {"ok": True}},
        content_type="application/json",
    )
    assert plain.status_code == 201

    health = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {HEALTH_TOKEN}")
    assert health.status_code == 503
    body = health.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["storage"]["status"] == "full"
    assert body["checks"]["database"]["status"] == "ok"


def test_a_read_only_storage_answers_503_storage_unavailable(settings, readonly_dir, agent_client):
    use_local_storage(settings, readonly_dir)
    assert_envelope(multipart_tag(agent_client, "ro", b"r" * 50_000), 503, "storage_unavailable")
    json_tag = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "ro2", "data": {}, "contents": "text"},
        content_type="application/json",
    )
    assert_envelope(json_tag, 503, "storage_unavailable")
    assert Artifact.objects.count() == 0
    assert agent_client.get("/reviewer/v1/artifacts").status_code == 200

    health = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {HEALTH_TOKEN}")
    assert health.status_code == 503
    storage = health.json()["checks"]["storage"]
    assert storage["status"] == "unavailable" and storage["error"] in {"EROFS", "EACCES"}


def test_healthz_answers_each_dependency_ok(settings, tmp_path, db):
    use_local_storage(settings, tmp_path)
    response = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {HEALTH_TOKEN}")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "storage", "channelLayer"}
    assert all(check["status"] == "ok" for check in body["checks"].values())
    assert body["checks"]["storage"]["freeBytes"] > 0
    assert response["Cache-Control"].startswith("max-age=0")
    assert leftovers(tmp_path) == []  # the probe's file is gone


def dead_s3(settings, port: int) -> None:
    pytest.importorskip("storages", reason="S3 needs django-storages (pip install -e .[scale])")
    from botocore.config import Config

    storages = {name: dict(conf) for name, conf in settings.STORAGES.items()}
    storages["artifacts"] = {
        "BACKEND": "agent_site.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": "gone",
            "endpoint_url": f"http://127.0.0.1:{port}",
            "region_name": "us-east-1",
            "access_key": "testing",
            "secret_key": "testing",
            "client_config": Config(
                s3={"addressing_style": "path"},
                connect_timeout=1,
                read_timeout=1,
                retries={"max_attempts": 1},
            ),
        },
    }
    settings.STORAGES = storages


def test_an_unreachable_s3_answers_503_for_writes_and_reads(
    settings, tmp_path, closed_port, agent_client
):
    use_local_storage(settings, tmp_path)
    stored = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "kept", "data": {}, "contents": "bytes"},
        content_type="application/json",
    ).json()
    dead_s3(settings, closed_port)
    tag = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "new", "data": {}, "contents": "more bytes"},
        content_type="application/json",
    )
    assert_envelope(tag, 503, "storage_unavailable")
    assert not Artifact.objects.filter(key="new").exists()
    read = agent_client.get(f"/reviewer/v1/artifacts/{stored['id']}/content")
    assert_envelope(read, 503, "storage_unavailable")
    assert leftovers(tmp_path) == []
    health = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {HEALTH_TOKEN}")
    assert health.status_code == 503
    assert health.json()["checks"]["storage"]["status"] == "unavailable"


@pytest.mark.scale
def test_a_stalled_s3_answers_503_within_the_default_client_bounds(
    settings, stalling_proxy, agent_client, _s3_server, monkeypatch
):
    """An S3 that accepts and never answers (a proxy in front of moto that stops forwarding) fails
    a download and an upload with 503 `storage_unavailable` after the default bounds — two attempts
    of a 10 s read — far before a proxy in front of the site would give up (nginx: 60 s)."""
    import time
    import uuid

    from agent_site.settings import s3_storage_from_env

    proxy = stalling_proxy(int(_s3_server.rsplit(":", 1)[1]))
    monkeypatch.setenv("ARTIFACTS_S3_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    conf = s3_storage_from_env()  # the default timeouts and retries
    conf["OPTIONS"]["location"] = f"stall-{uuid.uuid4().hex}"
    settings.STORAGES = {**settings.STORAGES, "artifacts": conf}
    stored = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "kept", "data": {}, "contents": "bytes"},
        content_type="application/json",
    )
    assert stored.status_code == 201, stored.content
    url = f"/reviewer/v1/artifacts/{stored.json()['id']}/content"
    proxy.stall()
    try:
        started = time.monotonic()
        assert_envelope(agent_client.get(url), 503, "storage_unavailable")
        read_took = time.monotonic() - started
        started = time.monotonic()
        tag = agent_client.post(
            "/reviewer/v1/artifacts",
            {"kind": "report", "key": "new", "data": {}, "contents": "more bytes"},
            content_type="application/json",
        )
        assert_envelope(tag, 503, "storage_unavailable")
        write_took = time.monotonic() - started
    finally:
        proxy.resume()
    assert read_took < 30 and write_took < 30, (read_took, write_took)
    assert not Artifact.objects.filter(key="new").exists()
    assert agent_client.get(url).status_code == 200  # answered again once S3 answers


@pytest.mark.scale
def test_an_s3_upload_that_fails_answers_503_not_500(settings, agent_client, _s3_server):
    """boto3's upload_file wraps what S3 answered (here: no such bucket) in S3UploadFailedError,
    which is the storage's failure like any other: 503 `storage_unavailable`, nothing tagged."""
    from agent_site.settings import s3_storage_from_env

    conf = s3_storage_from_env()
    conf["OPTIONS"]["bucket_name"] = "no-such-bucket"  # exists() answers False: the upload fails
    settings.STORAGES = {**settings.STORAGES, "artifacts": conf}
    tag = agent_client.post(
        "/reviewer/v1/artifacts",
        {"kind": "report", "key": "lost", "data": {}, "contents": "bytes"},
        content_type="application/json",
    )
    assert_envelope(tag, 503, "storage_unavailable")
    assert not Artifact.objects.filter(key="lost").exists()
