"""The REST API served by a real daphne process (DEBUG off): upload, streamed download, ranges,
headers and the 404 envelope, through the production ASGI app with its backpressure wrapper."""

from __future__ import annotations

import hashlib
import os

import httpx
import orjson
import pytest

from tests.servers import DaphneServer, sqlite_site


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("daphne")
    env, key = sqlite_site(data_dir)
    with DaphneServer(env, log_path=data_dir / "daphne.log", ready_path="/reviewer/v1/") as server:
        yield server.base_url, key, server.process.pid


def test_upload_and_streamed_download_under_daphne(served):
    base, key, _ = served
    auth = {"Authorization": f"Bearer {key}"}
    payload = os.urandom(5 * 1024 * 1024 + 3)
    made = httpx.post(
        base + "/reviewer/v1/artifacts",
        headers=auth,
        data={"record": orjson.dumps({"kind": "report", "key": "big", "data": {}}).decode()},
        files={"contents": ("big.html", payload, "text/html")},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    record = made.json()
    assert record["content"]["sha256"] == hashlib.sha256(payload).hexdigest()
    url = f"{base}/reviewer/v1/artifacts/{record['id']}/content"
    got = httpx.get(url, headers=auth, timeout=30)
    assert got.status_code == 200
    assert hashlib.sha256(got.content).hexdigest() == record["content"]["sha256"]
    assert got.headers["content-type"] == "text/html"
    assert got.headers["content-disposition"].startswith("attachment; filename=")
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-security-policy"] == "sandbox"
    assert int(got.headers["content-length"]) == len(payload)
    part = httpx.get(url, headers={**auth, "Range": "bytes=-100"}, timeout=30)
    assert part.status_code == 206 and part.content == payload[-100:]
    same = httpx.get(url, headers={**auth, "If-None-Match": got.headers["etag"]}, timeout=30)
    assert same.status_code == 304


def test_unknown_route_is_the_envelope_with_debug_off(served):
    base, key, _ = served
    for method in ("GET", "POST", "DELETE"):
        response = httpx.request(
            method, base + "/reviewer/v1/nothing", headers={"Authorization": f"Bearer {key}"}
        )
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "unknown_route"
    assert httpx.get(base + "/reviewer/v1/artifacts").json()["error"]["code"] == "not_authenticated"


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))


def test_concurrent_requests_reuse_the_request_threads(served):
    """agent_site.asgi.SyncChainASGIHandler reuses request threads instead of starting one per
    request: with 16 requests in flight every answer is right (each tag is listed by the next
    request), and a second round of 160 requests adds fewer threads than it has requests in flight
    (an executor goes back on the free list only once its thread is idle, so a few may be added)."""
    from concurrent.futures import ThreadPoolExecutor

    base, key, pid = served
    headers = {"Authorization": f"Bearer {key}"}

    def work(i: int) -> tuple[int, int]:
        with httpx.Client(base_url=base, timeout=30) as client:
            tagged = client.post(
                "/reviewer/v1/artifacts",
                headers=headers,
                json={"kind": "report", "key": f"pool-{i}", "data": {"title": "t", "body": str(i)}},
            )
            listed = client.get(
                "/reviewer/v1/artifacts", params={"key": f"pool-{i}"}, headers=headers
            )
            return tagged.status_code, len(listed.json()["results"])

    rounds = []
    for start in (0, 80):
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(work, range(start, start + 80)))
        assert answers == [(201, 1)] * 80
        rounds.append(_threads(pid))
    assert rounds[1] - rounds[0] < 16, rounds
