"""A full disk under a real daphne: a body streamed from the socket
(agent_site/server.py) into the blob writer is answered 507 with the envelope while it arrives, no
temporary file is kept, and requests that need no disk are served."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from artifacts_app import services
from artifacts_app.models import Artifact
from tests.consumers import live
from tests.faults.conftest import HEALTH, fill
from tests.servers import ROOT, DaphneServer


@pytest.mark.django_db(transaction=True)
def test_a_full_data_disk_answers_507_through_daphne(small_disk):
    agent = services.agent_create(slug="spool", max_artifacts=100)
    _, key = services.agent_key_create(agent=agent)
    env = {
        **os.environ,
        "DATABASE_URL": live.test_database_url(),  # the database is elsewhere; the data dir is full
        "ARTIFACTS_DATA_DIR": str(small_disk),
        "PYTHONPATH": str(ROOT),
    }
    with DaphneServer(env) as server:
        fill(small_disk)
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=server.base_url, headers=auth, timeout=60) as client:
            upload = client.post(
                "/spool/v1/artifacts",
                data={"record": json.dumps({"key": "big", "data": {"n": 1}})},
                files={"contents": ("c.bin", os.urandom(1024 * 1024), "application/octet-stream")},
            )
            assert upload.status_code == 507, upload.text[:300]
            assert upload.headers["content-type"] == "application/json"
            assert upload.json()["error"]["code"] == "storage_full"
            assert int(upload.headers["retry-after"]) > 0

            small = client.post("/spool/v1/artifacts", json={"key": "small", "data": {"n": 2}})
            assert small.status_code == 201, small.text
            put = client.put(
                f"/spool/v1/artifacts/{small.json()['id']}/content",
                content=b"p" * 200_000,  # past the streaming threshold: written to the full disk
                headers={"Content-Type": "text/plain"},
            )
            assert put.status_code == 507, put.text[:300]
            assert put.json()["error"]["code"] == "storage_full"

            health = client.get("/healthz", headers=HEALTH)
            assert health.status_code == 503
            assert health.json()["checks"]["storage"]["status"] == "full"
            assert client.get("/spool/v1/artifacts").status_code == 200
    assert list(Artifact.objects.values_list("key", flat=True)) == ["small"]
    assert Artifact.objects.get(key="small").blob_id is None
    assert [p.name for p in small_disk.rglob("blob-*")] == []
