"""Two daphne processes on PostgreSQL + Redis + S3: what one process takes, the other serves."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from contextlib import ExitStack

import httpx
import pytest
import websockets

from artifacts_app import services
from tests.scale.test_processes import child_env
from tests.servers import DaphneServer


@pytest.fixture
def two_servers(transactional_db):
    assert os.environ.get("ARTIFACTS_STORAGE") == "s3", "the scale run stores blobs in S3 (moto)"
    env = child_env()
    env.update(ARTIFACTS_PROCESSES="2", ARTIFACTS_S3_PREFIX=f"e2e-{uuid.uuid4().hex}")
    servers = [DaphneServer(env), DaphneServer(env)]
    with ExitStack() as stack:
        for server in servers:  # both start at once, then each is waited for
            stack.callback(server.stop)
            server.start(wait=False)
        for server in servers:
            server.wait_ready()
        yield [server.port for server in servers]


@pytest.mark.scale
def test_tag_through_one_process_download_and_event_through_the_other(two_servers):
    port_a, port_b = two_servers
    agent = services.agent_create(slug="e2e-two", max_artifacts=100)
    services.session_create(agent=agent, sid="s-e2e")
    _, key = services.agent_key_create(agent=agent)
    auth = {"Authorization": f"Bearer {key}"}
    blob = os.urandom(3 * 1024 * 1024) + b"end"

    async def run() -> tuple[dict, dict]:
        async with websockets.connect(
            f"ws://127.0.0.1:{port_b}/e2e-two/v1/sessions/s-e2e/events", additional_headers=auth
        ) as ws:
            async with httpx.AsyncClient(headers=auth, timeout=30) as client:
                response = await client.post(
                    f"http://127.0.0.1:{port_a}/e2e-two/v1/artifacts",
                    data={
                        "record": json.dumps(
                            {"kind": "report", "key": "big", "data": {"n": 1}, "sessionId": "s-e2e"}
                        )
                    },
                    files={"contents": ("r.bin", blob, "application/octet-stream")},
                )
                assert response.status_code == 201, response.text
                record = response.json()
            event = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
            return record, event

    record, event = asyncio.run(run())
    assert record["content"]["sha256"] == hashlib.sha256(blob).hexdigest()
    assert event["type"] == "artifact.tagged" and event["record"]["id"] == record["id"]
    assert event["sessionId"] == "s-e2e" and event["seq"] == 1

    with httpx.Client(headers=auth, timeout=30) as client:
        url = f"http://127.0.0.1:{port_b}/e2e-two/v1/artifacts/{record['id']}/content"
        response = client.get(url)
        assert response.status_code == 200
        assert response.content == blob
        assert response.headers["etag"] == f'"{record["content"]["sha256"]}"'
        part = client.get(url, headers={"Range": "bytes=-3"})
        assert part.status_code == 206 and part.content == b"end"
        listed = client.get(f"http://127.0.0.1:{port_b}/e2e-two/v1/artifacts").json()
        assert [r["id"] for r in listed["results"]] == [record["id"]]
