"""``kill -9`` of a daphne in the middle of multipart uploads: the temporary
files it was writing stay behind, and ``gc_blobs`` removes them; every acknowledged tag still has
its bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from artifacts_app import services
from tests.consumers import live
from tests.servers import ROOT, DaphneServer

UPLOAD = 16 * 1024 * 1024
UPLOADERS = 3


def temp_files(data_dir: Path) -> list[Path]:
    return [p for p in data_dir.rglob("blob-*") if p.is_file()]


def upload_until(stop: threading.Event, base_url: str, key: str, done: list[dict]) -> None:
    n = 0
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as client:
        while not stop.is_set():
            n += 1
            blob = os.urandom(64) * (UPLOAD // 64)
            record = {"kind": "report", "key": f"{threading.get_ident()}-{n}", "data": {"n": n}}
            try:
                response = client.post(
                    "/crash/v1/artifacts",
                    data={"record": json.dumps(record)},
                    files={"contents": ("c.bin", blob, "application/octet-stream")},
                    timeout=120,
                )
            except httpx.HTTPError:
                return  # the server was killed under this request
            if response.status_code == 201:
                done.append(response.json())


def kill_while_writing(server: DaphneServer, data_dir: Path, key: str) -> list[dict]:
    """Upload from several threads; kill -9 as soon as a temporary blob file exists."""
    stop = threading.Event()
    done: list[dict] = []
    threads = [
        threading.Thread(target=upload_until, args=(stop, server.base_url, key, done))
        for _ in range(UPLOADERS)
    ]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 120
        while not temp_files(data_dir):
            assert time.monotonic() < deadline, "no upload reached the blob store in 120 s"
            time.sleep(0.002)
        server.kill()
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    return done


@pytest.mark.django_db(transaction=True)
def test_gc_blobs_removes_what_uploads_killed_mid_write_left(tmp_path):
    agent = services.agent_create(slug="crash", max_artifacts=1000)
    _, key = services.agent_key_create(agent=agent)
    data_dir = tmp_path / "data"
    env = {
        **os.environ,
        "DATABASE_URL": live.test_database_url(),
        "PYTHONPATH": str(ROOT),
        "ARTIFACTS_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "agent_site.settings",
    }
    server = DaphneServer(env)
    acknowledged: list[dict] = []
    left: list[Path] = []
    for _ in range(3):  # the file may be moved into place between the look and the kill
        server.start()
        acknowledged += kill_while_writing(server, data_dir, key)
        left = temp_files(data_dir)
        if left:
            break
    assert left, "no temporary file was left by three kills mid-upload"

    done = subprocess.run(
        [sys.executable, "manage.py", "gc_blobs", "--grace", "0s"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"removed {len(left)} temporary file(s)" in done.stdout, done.stdout
    assert temp_files(data_dir) == []

    # Every tag that was answered 201 still has its bytes (gc kept what records point at).
    with server:
        with httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}
        ) as c:
            for record in acknowledged:
                response = c.head(f"/crash/v1/artifacts/{record['id']}/content", timeout=60)
                assert response.status_code == 200, record["id"]
                assert response.headers["etag"] == f'"{record["content"]["sha256"]}"'
