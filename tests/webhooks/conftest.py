from __future__ import annotations

import time

import pytest

from artifacts_app import services, webhooks
from artifacts_app.models import Agent
from tests.webhooks.receiver import Receiver


@pytest.fixture
def hook_settings(settings):
    """Webhooks to the tests' own receivers on 127.0.0.1 over plain HTTP, retried quickly."""
    settings.ARTIFACTS_WEBHOOK_ALLOW_HTTP = True
    settings.ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.ARTIFACTS_WEBHOOK_RETRY_DELAYS = [0.05, 0.1, 0.2]
    settings.ARTIFACTS_WEBHOOK_TIMEOUT = 1.0
    settings.ARTIFACTS_WEBHOOK_LEASE = 3.0
    settings.ARTIFACTS_WEBHOOK_POLL = 0.05
    return settings


@pytest.fixture
def agent(transactional_db, hook_settings) -> Agent:
    return services.agent_create(slug="hooked", max_artifacts=1000)


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


@pytest.fixture
def deliverer(agent):
    runner = webhooks.Runner(2).start()
    yield runner
    assert runner.stop(10)


def tag(agent: Agent, n: int, kind: str = "note") -> int:
    """Tag ``n`` records; answers the last event's seq."""
    for i in range(n):
        services.artifact_tag(
            agent=agent, kind=kind, key=f"k{time.monotonic_ns()}-{i}", data={"i": i}
        )
    agent.refresh_from_db()
    return agent.last_seq


def until(predicate, what: str, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
