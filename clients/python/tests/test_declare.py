"""``declare``: kinds declared over HTTP (``PUT artifacts/kinds``) through the kit, against the live
daphne. ``declared`` is a freeform agent of the test server that only these tests declare."""

from __future__ import annotations

import uuid

import pytest
from agent_artifacts_client import ArtifactsClient, AsyncArtifactsClient, ClientError
from conftest import Served

KINDS = {
    "reviewed-pr": {
        "description": "A pull request this agent reviewed.",
        "schema": {
            "type": "object",
            "properties": {
                "url": {"type": "string"},
                "verdict": {"type": "string", "default": "comment"},
            },
            "required": ["url"],
        },
        "keepVersions": 3,
    },
    "report": {"description": "A generated report."},
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def declared(served: Served):
    with ArtifactsClient(served.base, served.declared_key, "declared") as c:
        yield c


def test_declare_then_the_server_validates_fills_defaults_and_keeps_versions(declared):
    answer = declared.declare(KINDS, agent_tool=True, max=50, keep_versions=5)
    assert sorted(k["name"] for k in answer["kinds"]) == ["report", "reviewed-pr"]
    assert (answer["max"], answer["agentTool"]) == (50, True)
    assert declared.kinds() == answer
    url = unique("https://x/pull")
    assert declared.tag(kind="reviewed-pr", key=url, data={"url": url}).data == {
        "url": url,
        "verdict": "comment",
    }
    with pytest.raises(ClientError) as err:
        declared.tag(kind="reviewed-pr", data={"verdict": "x"})
    assert err.value.code == "schema_invalid"
    assert [d["loc"] for d in err.value.details] == [["url"]]
    with pytest.raises(ClientError) as err:
        declared.tag(kind="other", data=1)
    assert err.value.code == "unknown_kind"
    assert declared.tool("openai")["function"]["strict"] is True
    for n in range(4):
        record = declared.tag(kind="reviewed-pr", key=url, data={"url": url, "verdict": f"v{n}"})
    assert [v.version for v in declared.versions(record.id)] == [5, 4, 3]  # the kind keeps 3


@pytest.mark.parametrize(
    ("schema", "code"),
    [
        ({"$ref": "https://example.com/s.json"}, "invalid_schema"),
        ({"type": "no-such-type"}, "invalid_schema"),
    ],
)
def test_a_bad_schema_is_refused_and_changes_nothing(declared, schema, code):
    before = declared.declare(KINDS)
    with pytest.raises(ClientError) as err:
        declared.declare({"x": {"description": "x", "schema": schema}})
    assert (err.value.status, err.value.code) == (400, code)
    assert err.value.message and declared.kinds() == before


def test_declare_is_refused_for_kinds_in_code_and_for_users(served: Served):
    with ArtifactsClient(served.base, served.key, "reviewer") as reviewer:
        with pytest.raises(ClientError) as err:
            reviewer.declare(KINDS)
        assert (err.value.status, err.value.code) == (409, "kinds_in_code")
    with ArtifactsClient(served.base, served.user_token, "declared") as uma:
        with pytest.raises(ClientError) as err:
            uma.declare(KINDS)
        assert err.value.status == 403


async def test_async_declare(served: Served):
    async with AsyncArtifactsClient(served.base, served.declared_key, "declared") as c:
        answer = await c.declare({"report": {"description": "A generated report."}})
        assert [k["name"] for k in answer["kinds"]] == ["report"] and answer["agentTool"] is False
