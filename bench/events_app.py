"""The server side of bench/events.py (not part of the site): an ASGI app for daphne.

BENCH_MODE=ours:  the site's websocket streams; POST /_bench/emit tags for real (services.artifact_tag
                  in a worker thread, as a REST tag would), so latency is tag → event.
BENCH_MODE=plain: the plain Channels pattern — every socket its own layer channel in one group, one
                  group_send per event; POST /_bench/emit group_sends.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from django.urls import re_path

from agent_site.asgi import application as site

MODE = os.environ.get("BENCH_MODE", "ours")


def fake_event(i: int) -> dict:
    """The same shape and size as a real artifact.tagged message."""
    return {
        "type": "artifact.tagged",
        "seq": i + 1,
        "sessionId": "s_bench",
        "at": "2026-12-01T00:00:00.000Z",
        "record": {
            "id": f"art_{i:024d}",
            "kind": "note",
            "key": None,
            "title": None,
            "data": {"i": i, "t": time.time()},
            "source": "host",
        },
    }


class PlainConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        await self.channel_layer.group_add("bench", self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        await self.channel_layer.group_discard("bench", self.channel_name)

    async def bench_msg(self, event):
        await self.send(text_data=event["text"])


plain_ws = URLRouter([re_path(r"", PlainConsumer.as_asgi())])


async def paced(n: int, rate: float, emit) -> None:
    start = time.perf_counter()
    for i in range(n):
        if rate:
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        await emit(i)


def tag_paced(slug: str, sid: str, n: int, rate: float, done: threading.Event) -> None:
    from artifacts_app import services

    start = time.perf_counter()
    for i in range(n):
        if rate:
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        services.artifact_tag(
            agent=slug, session_id=sid, kind="note", data={"i": i, "t": time.time()}
        )
    done.set()


async def publish_only(slug: str, n: int, rate: float) -> None:
    """The fan-out alone: fake events through events.publish from a thread, as a commit hook does
    (continuing the feed's seq, so the hub takes them in order)."""
    from artifacts_app import events, fanout
    from artifacts_app.models import Agent

    agent_id = await Agent.objects.filter(slug=slug).values_list("pk", flat=True).afirst()
    feed = fanout.hub().feeds[agent_id]
    first = feed.next_seq

    def run() -> None:
        start = time.perf_counter()
        for i in range(n):
            if rate:
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            event = fake_event(i)
            event["seq"] = first + i
            events.publish(agent_id, [event])

    await asyncio.to_thread(run)


async def emit(query: dict) -> None:
    n = int(query["n"][0])
    rate = float(query.get("rate", ["0"])[0])
    if query.get("source", ["tag"])[0] == "publish":
        await publish_only(query["slug"][0], n, rate)
    elif MODE == "plain":
        layer = get_channel_layer()

        async def one(i: int) -> None:
            await layer.group_send(
                "bench", {"type": "bench.msg", "text": json.dumps(fake_event(i))}
            )

        await paced(n, rate, one)
    else:
        done = threading.Event()
        threading.Thread(
            target=tag_paced, args=(query["slug"][0], query["sid"][0], n, rate, done), daemon=True
        ).start()
        while not done.is_set():
            await asyncio.sleep(0.01)


async def application(scope, receive, send):
    if scope["type"] == "websocket":
        return await (plain_ws if MODE == "plain" else site)(scope, receive, send)
    if scope["type"] == "http" and scope["path"] == "/_bench/emit":
        while (await receive()).get("more_body"):
            pass
        await emit(parse_qs(scope["query_string"].decode()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return None
    return await site(scope, receive, send)
