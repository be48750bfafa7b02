"""PostgreSQL + Redis: four processes tag one agent at once (API.md Tag rules 5, 7, 8)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from channels.layers import get_channel_layer
from django.db import connection

from artifacts_app import services
from artifacts_app.fanout import agent_group
from artifacts_app.models import Agent, Artifact, Event

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
TAGS = 200


def child_env() -> dict[str, str]:
    """The environment of a server or worker process that uses the test database."""
    conf = connection.settings_dict
    url = f"postgres://{conf['USER']}@{conf['HOST']}:{conf['PORT'] or 5432}/{conf['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "agent_site.settings"}


@pytest.mark.scale
@pytest.mark.django_db(transaction=True)
def test_four_processes_tagging_one_agent_stay_exact_and_lose_no_event():
    assert connection.vendor == "postgresql"
    agent = services.agent_create(slug="four-procs", max_artifacts=100)
    env = child_env()

    async def run() -> list[dict]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(agent_group(agent.pk), channel)
        start_at = time.time() + 4
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.scale._tagger",
                agent.slug,
                str(n),
                str(TAGS),
                str(start_at),
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for n in range(PROCESSES)
        ]
        received: list[dict] = []
        waiting = asyncio.gather(*(p.communicate() for p in procs))
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=3)
                received.append(message)
            except TimeoutError:
                if waiting.done():
                    break
        outputs = await waiting
        await layer.group_discard(agent_group(agent.pk), channel)
        for proc, (_out, err) in zip(procs, outputs, strict=True):
            assert proc.returncode == 0, err.decode()[-2000:]
        return received

    received = asyncio.run(run())

    agent = Agent.objects.get(pk=agent.pk)
    assert Artifact.objects.filter(agent=agent).count() == 100 == agent.artifact_count
    assert Artifact.objects.filter(agent=agent, key="shared").count() == 1
    seqs = list(Event.objects.filter(agent=agent).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, agent.last_seq + 1))
    assert Event.objects.filter(agent=agent, type="artifact.tagged").count() == PROCESSES * TAGS
    created = PROCESSES * TAGS // 2 + 1  # every odd tag a new key, plus the shared one
    assert Event.objects.filter(agent=agent, type="artifact.deleted").count() == created - 100
    # Every stored event reached the live subscriber in another process, once.
    assert sorted(seq for m in received for seq in seqs_of(m)) == seqs


def seqs_of(message: dict) -> list[int]:
    """A layer message is one event, or (the fan-out's form) a batch of one transaction's events."""
    return [e["seq"] for e in message["events"]] if "events" in message else [message["seq"]]
