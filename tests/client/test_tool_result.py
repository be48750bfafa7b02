"""The client kit's ``ToolResult`` answers the model exactly as the in-process one does.

The kit cannot import the server (it must install without Django), so the text and the provider
shapes of a tool result exist twice: in ``artifacts_app.tool`` and in ``agent_artifacts_client``.
This test holds them to one answer: the same calls, run in process on the test database and through
the kit against the live daphne, give equal results (a keyed record's id is derived from the agent
and the key, so even the ids match).
"""

from __future__ import annotations

import uuid

import pytest
from agent_artifacts_client import ArtifactsClient
from agent_artifacts_client import is_model_error as kit_is_model_error

from artifacts_app import artifacts
from artifacts_app.tool import is_model_error


def calls(key: str) -> list[dict]:
    good = {"kind": "reviewed-pr", "key": key, "title": None, "data": {"url": key, "verdict": "ok"}}
    return [
        {"artifact": good},  # created
        {"artifact": good},  # replaced
        {"artifact": {**good, "data": {"verdict": "x"}}},  # schema: names artifact.data.url
        {"artifact": {**good, "kind": "nope"}},  # unknown kind
        {"artifact": {**good, "extra": 1}},  # not a field
        {"nothing": 1},
        "not json",
    ]


def test_kit_and_in_process_tool_results_are_the_same(reviewer, served):
    key = f"https://x/pull/{uuid.uuid4().hex[:8]}"
    api = artifacts("reviewer")
    with ArtifactsClient(served.base, served.key, "reviewer") as client:
        for call in calls(key):
            here, there = api.run_tool(call), client.run_tool(call)
            assert (here.ok, here.content, here.code, here.created) == (
                there.ok, there.content, there.code, there.created,
            ), call  # fmt: skip
            assert here.details == there.details
            assert here.anthropic("t1") == there.anthropic("t1")
            assert here.openai("c1") == there.openai("c1")
            assert here.openai_responses("f1") == there.openai_responses("f1")


@pytest.mark.parametrize("status", [200, 400, 403, 404, 413])
@pytest.mark.parametrize(
    "details",
    [
        None,
        {},
        {"field": "input"},
        {"field": "artifact"},
        {"field": "artifact.data.url"},
        {"field": "data"},
        {"field": "sessionId"},
        {"field": 3},
        "text",
    ],
)
def test_kit_and_server_agree_on_whose_mistake_a_refusal_is(status, details):
    assert kit_is_model_error(status, details) == is_model_error(status, details)
