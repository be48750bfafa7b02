"""The embedded profile: the site's own server process delivers (its deliverer starts with the
application and stops with it); over the real routes, to a real receiver."""

from __future__ import annotations

import httpx
import pytest
from standardwebhooks import Webhook as Verifier

from tests.servers import DaphneServer, sqlite_site
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.slow


def test_the_sites_process_delivers_what_its_routes_tag(tmp_path):
    env, key = sqlite_site(
        tmp_path,
        ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER="1",
        ARTIFACTS_WEBHOOK_ALLOW_HTTP="1",
        ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS="127.0.0.1/32",
        ARTIFACTS_WEBHOOK_POLL_MS="200",
    )
    auth = {"Authorization": f"Bearer {key}"}
    with Receiver() as receiver, DaphneServer(env, ready_path="/healthz") as server:
        with httpx.Client(base_url=server.base_url, headers=auth, timeout=30) as http:
            made = http.post("/reviewer/v1/webhooks", json={"url": receiver.url()})
            assert made.status_code == 201, made.text
            hook = made.json()
            for n in range(3):
                tagged = http.post(
                    "/reviewer/v1/artifacts", json={"kind": "report", "data": {"n": n}}
                )
                assert tagged.status_code == 201, tagged.text
            got = receiver.wait(3, seconds=30)
            verifier = Verifier(hook["secret"])
            events = [verifier.verify(r.body, r.headers) for r in got]
            assert [e["record"]["data"] for e in events] == [{"n": 0}, {"n": 1}, {"n": 2}]
            assert all(e["agent"] == "reviewer" for e in events)
        process = server.process
        assert process is not None
        server.stop()  # SIGTERM: the deliverer stops with the process, not killed after 10 s
        assert process.returncode != -9, server.output()
