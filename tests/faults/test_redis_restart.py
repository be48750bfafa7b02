"""A Redis that goes away and comes back restarted: no subscriber is cut off.

Two daphnes share the test database and a redis-server of the test's own (started on a free port,
killed and started again: it comes back empty, its groups forgotten). Subscribers on both
processes, on the agent's stream and on a session's, each receive every seq of a burst that spans
the outage and the restart, in order, once — those of the other process too: while Redis is away
their hub reads the stored events, and when it is back (another run_id) the hub re-adds its groups
and catches up (``fanout.resync.watch_forever``).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import httpx
import pytest
import websockets

from artifacts_app import services
from tests.consumers import live
from tests.faults.conftest import HEALTH
from tests.servers import ROOT, DaphneServer

BURST = 15  # tags per phase: Redis up, Redis gone, Redis restarted
TOTAL = 3 * BURST


class Subscriber:
    def __init__(self, name: str, url: str, auth: dict[str, str]) -> None:
        self.name, self.url, self.auth = name, url, auth
        self.seqs: list[int] = []
        self.changed = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()

    async def run(self) -> None:
        async with websockets.connect(self.url, additional_headers=self.auth) as ws:
            self.ready.set()
            async for text in ws:
                self.seqs.append(json.loads(text)["seq"])
                self.changed.set()
                if self.seqs[-1] >= TOTAL:
                    return

    async def reached(self, seq: int, timeout: float = 60) -> None:
        async def wait() -> None:
            while not self.seqs or self.seqs[-1] < seq:
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"{self.name} stopped at {self.seqs[-3:]}, waiting for {seq}"
            ) from None


@pytest.mark.django_db(transaction=True)
def test_subscribers_on_both_processes_get_every_event_across_a_redis_restart(own_redis, tmp_path):
    agent = services.agent_create(slug="restart", max_artifacts=1000)
    services.session_create(agent=agent, sid="s-restart")
    _, key = services.agent_key_create(agent=agent)
    auth = {"Authorization": f"Bearer {key}"}
    env = {
        **os.environ,
        "DATABASE_URL": live.test_database_url(),
        "PYTHONPATH": str(ROOT),
        "REDIS_URL": own_redis.url,
        "ARTIFACTS_REDIS_PREFIX": f"faults-{uuid.uuid4().hex[:8]}",
        "ARTIFACTS_PROCESSES": "2",
        "ARTIFACTS_WS_LAYER_WATCH_MS": "500",
        "ARTIFACTS_DATA_DIR": str(tmp_path / "data"),
    }
    tagger, other = DaphneServer(env), DaphneServer(env)
    try:
        tagger.start(wait=False)
        other.start(wait=False)
        tagger.wait_ready()
        other.wait_ready()
        asyncio.run(_burst_across_a_restart(tagger, other, own_redis, auth))
    finally:
        tagger.stop()
        other.stop()


async def _burst_across_a_restart(tagger, other, own_redis, auth) -> None:
    subscribers = [
        Subscriber(f"{where} {stream}", f"{server.ws_url}/restart/v1/{path}", auth)
        for where, server in (("other process", other), ("tagging process", tagger))
        for stream, path in (("agent", "events"), ("session", "sessions/s-restart/events"))
    ]
    for sub in subscribers:
        sub.task = asyncio.create_task(sub.run())
        await asyncio.wait_for(sub.ready.wait(), 30)
    async with httpx.AsyncClient(base_url=tagger.base_url, headers=auth, timeout=60) as client:
        n = 0

        async def tag_burst() -> None:
            nonlocal n
            for _ in range(BURST):
                n += 1
                response = await client.post(
                    "/restart/v1/artifacts",
                    json={"key": f"k{n}", "data": {"n": n}, "sessionId": "s-restart"},
                )
                assert response.status_code == 201, response.text

        async def all_reached(seq: int) -> None:
            await asyncio.gather(*(sub.reached(seq) for sub in subscribers))

        await tag_burst()  # 1..15, Redis up
        await all_reached(BURST)

        own_redis.kill()
        await tag_burst()  # 16..30: tags still answer; the other process reads them stored
        await all_reached(2 * BURST)
        async with httpx.AsyncClient(base_url=other.base_url, timeout=60) as probe:
            health = await probe.get("/healthz", headers=HEALTH)
        assert health.status_code == 200, health.text  # HTTP is served: degraded, not down
        assert health.json()["status"] == "degraded"
        assert health.json()["checks"]["channelLayer"]["status"] == "unavailable"

        own_redis.start()  # empty: the groups are forgotten
        await tag_burst()  # 31..45
        await all_reached(TOTAL)
        async with httpx.AsyncClient(base_url=other.base_url, timeout=60) as probe:
            assert (await probe.get("/healthz")).json()["status"] == "ok"

    await asyncio.wait_for(asyncio.gather(*(sub.task for sub in subscribers)), 30)
    for sub in subscribers:
        assert sub.seqs == list(range(1, TOTAL + 1)), (sub.name, sub.seqs)
