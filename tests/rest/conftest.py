from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from artifacts_app import services
from artifacts_app.models import Agent


@dataclass
class World:
    """Two agents, three users and their credentials, sessions and artifacts, for access tests."""

    agent: Agent
    other: Agent
    agent_key: str
    other_key: str
    alice_token: str
    bob_token: str
    staff_token: str
    alice_session: str
    bob_session: str
    alice_ids: list[str]
    bob_ids: list[str]
    loose_ids: list[str]  # sessionless
    content_id: str

    def all_ids(self) -> set[str]:
        return set(self.alice_ids) | set(self.bob_ids) | set(self.loose_ids)


def bearer(token: str | None) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("sam", password="sam-pw-123", is_staff=True)


@pytest.fixture
def world(reviewer, alice, bob, staff) -> World:
    other = services.agent_create(slug="other", max_artifacts=100)
    _, agent_key = services.agent_key_create(agent=reviewer)
    _, other_key = services.agent_key_create(agent=other)
    _, alice_token = services.user_token_create(user=alice)
    _, bob_token = services.user_token_create(user=bob)
    _, staff_token = services.user_token_create(user=staff)
    a_sess = services.session_create(agent=reviewer, sid="s-alice", owner="alice").sid
    b_sess = services.session_create(agent=reviewer, sid="s-bob", owner="bob").sid

    def tag(i: int, session: str | None, **extra: Any) -> str:
        return services.artifact_tag(
            agent=reviewer,
            kind="reviewed-pr",
            key=f"https://x/pr/{i}",
            data={"url": f"https://x/pr/{i}"},
            session_id=session,
            **extra,
        ).record.id

    alice_ids = [tag(i, a_sess) for i in range(3)]
    bob_ids = [tag(i, b_sess) for i in range(3, 5)]
    loose_ids = [tag(5, None)]
    content_id = tag(6, a_sess, contents=b"hello", content_type="text/plain")
    alice_ids.append(content_id)
    services.artifact_tag(agent=other, kind="note", data={"x": 1})
    return World(
        agent=reviewer,
        other=other,
        agent_key=agent_key,
        other_key=other_key,
        alice_token=alice_token,
        bob_token=bob_token,
        staff_token=staff_token,
        alice_session=a_sess,
        bob_session=b_sess,
        alice_ids=alice_ids,
        bob_ids=bob_ids,
        loose_ids=loose_ids,
        content_id=content_id,
    )


@pytest.fixture
def api(world) -> Client:
    return Client()


def body(response) -> bytes:
    """The whole body of a response, streamed ones (an async generator) included."""
    if not getattr(response, "streaming", False):
        return response.content
    from asgiref.sync import async_to_sync

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()
