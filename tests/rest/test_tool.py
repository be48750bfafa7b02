"""GET/POST /<slug>/v1/tools/tag_artifact: formats, the tool switch, running calls as the model."""

from __future__ import annotations

import orjson
import pytest

from artifacts_app import services
from artifacts_app.models import Agent, Artifact
from tests.rest.conftest import bearer

URL = "/reviewer/v1/tools/tag_artifact"
CALL = {
    "artifact": {
        "kind": "reviewed-pr",
        "key": "https://x/pull/1",
        "title": None,
        "data": {"url": "https://x/pull/1", "verdict": None},
    }
}


@pytest.fixture
def key(reviewer) -> str:
    return services.agent_key_create(agent=reviewer)[1]


def post(client, body, token, url=URL):
    return client.post(
        url, data=orjson.dumps(body), content_type="application/json", **bearer(token)
    )


@pytest.mark.parametrize(
    ("query", "check"),
    [
        ("", lambda t: t["name"] == "tag_artifact" and t["input_schema"]["type"] == "object"),
        ("?format=anthropic", lambda t: "input_schema" in t),
        ("?format=openai", lambda t: t["type"] == "function" and t["function"]["strict"] is True),
        ("?format=openai-responses", lambda t: t["name"] == "tag_artifact" and t["strict"] is True),
    ],
)
def test_definition_in_each_format(client, key, query, check):
    response = client.get(URL + query, **bearer(key))
    assert response.status_code == 200
    assert check(orjson.loads(response.content))


def test_unknown_format_is_400(client, key):
    response = client.get(URL + "?format=gemini", **bearer(key))
    assert response.status_code == 400
    assert orjson.loads(response.content)["error"]["code"] == "unknown_format"


def test_agent_without_the_tool_answers_404_for_both_methods(client, db, settings):
    settings.ARTIFACTS_AGENTS = {**settings.ARTIFACTS_AGENTS, "shadowing": "tests.agents.shadowing"}
    free = services.agent_create(slug="free")
    shadow = Agent.objects.create(slug="shadowing", module="tests.agents.shadowing")
    for agent in (free, shadow):
        token = services.agent_key_create(agent=agent)[1]
        url = f"/{agent.slug}/v1/tools/tag_artifact"
        got = client.get(url, **bearer(token))
        ran = post(client, {"input": CALL}, token, url)
        for response in (got, ran):
            assert response.status_code == 404
            assert orjson.loads(response.content)["error"]["code"] == "tool_not_offered"
    assert not Artifact.objects.exists()


def test_run_tags_as_the_model_201_then_200(client, key):
    sid = services.session_create(agent="reviewer", sid="s-1").sid
    first = post(client, {"input": CALL, "sessionId": sid, "turnId": "t-1"}, key)
    assert first.status_code == 201, first.content
    record = orjson.loads(first.content)
    assert record["source"] == "model" and record["sessionId"] == sid and record["turnId"] == "t-1"
    assert record["data"] == {"url": "https://x/pull/1", "verdict": "comment"}
    again = post(client, {"input": CALL}, key)
    assert again.status_code == 200 and orjson.loads(again.content)["id"] == record["id"]


def test_openai_arguments_as_a_json_string_are_accepted(client, key):
    response = post(client, {"input": orjson.dumps(CALL).decode()}, key)
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "input"),
        ({"input": {}}, "artifact"),
        ({"input": {"artifact": {**CALL["artifact"], "kind": "nope"}}}, "artifact.kind"),
        (
            {"input": {"artifact": {**CALL["artifact"], "data": {"verdict": "x"}}}},
            "artifact.data.url",
        ),
        ({"input": {"artifact": {**CALL["artifact"], "key": "k" * 2000}}}, "artifact.key"),
    ],
)
def test_model_mistakes_are_400_naming_the_field(client, key, body, field):
    response = post(client, body, key)
    assert response.status_code == 400
    error = orjson.loads(response.content)["error"]
    assert error["details"]["field"] == field and error["message"]
    assert not Artifact.objects.exists()


def test_unknown_body_field_and_unknown_session(client, key):
    extra = post(client, {"input": CALL, "source": "host"}, key)
    assert extra.status_code == 400
    assert orjson.loads(extra.content)["error"]["code"] == "unknown_field"
    missing = post(client, {"input": CALL, "sessionId": "s-none"}, key)
    assert missing.status_code == 404
    assert orjson.loads(missing.content)["error"]["code"] == "unknown_session"
