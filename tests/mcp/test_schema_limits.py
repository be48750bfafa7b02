"""MCP ``tag_artifact`` (a model chooses the data) under the same bounds as every other entry
point, over real HTTP against daphne: an exponential pattern is answered at once, and validation
past ``ARTIFACTS_MAX_VALIDATION_MS`` (5 ms on this module's server) is refused with
``schema_too_costly``, nothing stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async

from artifacts_app import services
from artifacts_app.models import Agent, Artifact, Event
from tests.mcp.conftest import mcp, rest, server_env
from tests.schemas import fan_out
from tests.servers import DaphneServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BUDGET_MS = 5  # thread CPU time: a small honest tag spends ~0.1 ms of it
EVIL = "a" * 40 + "!"


KINDS = {
    "named": {
        "description": "A thing with a name.",
        "schema": {
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
    "costly": {
        "description": "Numbers, each checked against a fan-out the PUT accepts.",
        "schema": {
            "type": "array",
            "items": {"$ref": "#/$defs/d0"},
            "$defs": fan_out(7, "anyOf")["$defs"],
        },
    },
}


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, _shared_store) -> Any:
    with django_db_blocker.unblock():
        env = server_env(_shared_store)
    env["ARTIFACTS_MAX_VALIDATION_MS"] = str(BUDGET_MS)
    server = DaphneServer(env).start()
    yield server
    server.stop()


@pytest.fixture
def key() -> str:
    agent = services.agent_create(slug="free", max_artifacts=100)
    services.kinds_declare(agent=agent, declaration={"kinds": KINDS, "agentTool": True})
    return services.agent_key_create(agent=agent)[1]


def _call(kind: str, data: Any) -> dict[str, Any]:
    return {"artifact": {"kind": kind, "key": None, "title": None, "data": data}}


def _refusal(result: Any) -> str:
    """The refusal as the client sees it (its text and structured content), for a code search."""
    texts = [getattr(c, "text", "") for c in result.content]
    return " ".join(texts) + json.dumps(result.structured_content)


@database_sync_to_async
def _stored() -> tuple[int, int]:
    agent = Agent.objects.get(slug="free")
    return Artifact.objects.filter(agent=agent).count(), Event.objects.count()


@pytest.mark.timeout(120)
async def test_an_exponential_pattern_through_mcp_is_answered_at_once(live, key):
    async with mcp(live, key, slug="free") as client:
        refused = await client.call_tool("tag_artifact", _call("named", {"name": EVIL}))
        assert refused.is_error and "schema_invalid" in _refusal(refused)
        tagged = await client.call_tool("tag_artifact", _call("named", {"name": "aaaa"}))
        assert not tagged.is_error, _refusal(tagged)
    assert (await rest(live, "GET", "/healthz", None)).status_code in (200, 503)


async def test_past_the_budget_mcp_tag_artifact_is_schema_too_costly_and_stores_nothing(live, key):
    before = await _stored()
    async with mcp(live, key, slug="free") as client:
        refused = await client.call_tool("tag_artifact", _call("costly", [1] * 2999 + ["x"]))
        assert refused.is_error and "schema_too_costly" in _refusal(refused)
        assert await _stored() == before
        small = await client.call_tool("tag_artifact", _call("costly", [1, 2, 3]))
        assert not small.is_error, _refusal(small)  # under the budget: stored
    assert (await _stored())[0] == before[0] + 1
