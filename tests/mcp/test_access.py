"""The access matrix through MCP: every kind of caller sees and may do exactly what REST allows it
(tests/rest/test_access_matrix.py), compared id for id against the REST answers of the same run."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import World, list_all, mcp, rest, rest_ids
from tests.mcp.test_refusals import envelope_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CALLERS = ("none", "agent", "other_agent", "owner", "other_user", "staff")
TAG = {"artifact": {"kind": "report", "key": None, "title": None, "data": "r"}}


def _token(world: World, caller: str) -> str | None:
    return {
        "none": None,
        "agent": world.agent_key,
        "other_agent": world.other_key,
        "owner": world.alice_token,
        "other_user": world.bob_token,
        "staff": world.staff_token,
    }[caller]


async def _mcp_readable(client, uri: str) -> bool:
    try:
        await client.read_resource(uri)
    except MCPError as error:
        assert error.error.code == -32002, error.error  # hidden and missing: not found
        return False
    return True


@pytest.mark.parametrize("caller", CALLERS)
async def test_mcp_shows_each_caller_exactly_what_rest_shows(world: World, live, caller: str):
    token = _token(world, caller)
    listed = await rest(live, "GET", "/reviewer/v1/artifacts", token)
    probe = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    door = await rest(live, "POST", "/reviewer/mcp", token, json=probe)
    if listed.status_code != 200:
        # No credentials (401), another agent's key (403): the same status and code, no MCP.
        assert door.status_code == listed.status_code
        assert door.json()["error"]["code"] == listed.json()["error"]["code"]
        return

    expected = await rest_ids(live, token)
    candidates = sorted(world.all_ids())
    async with mcp(live, token) as client:
        uris = await list_all(client)
        assert uris == [f"artifact://reviewer/{rid}" for rid in expected]
        page = await client.call_tool("list_artifacts", {"limit": 500})
        assert [r["id"] for r in page.structured_content["results"]] == expected
        for rid in candidates:
            record = await rest(live, "GET", f"/reviewer/v1/artifacts/{rid}", token)
            assert await _mcp_readable(client, f"artifact://reviewer/{rid}") == (
                record.status_code == 200
            ), rid
            version = await rest(live, "GET", f"/reviewer/v1/artifacts/{rid}/versions/1", token)
            assert await _mcp_readable(client, f"artifact://reviewer/{rid}/versions/1") == (
                version.status_code == 200
            ), rid
            read = await client.call_tool("read_artifact", {"id": rid})
            assert read.is_error == (record.status_code != 200), rid

        tagged = await rest(
            live, "POST", "/reviewer/v1/tools/tag_artifact", token, json={"input": TAG}
        )
        answer = await client.call_tool("tag_artifact", TAG)
        assert answer.is_error == (tagged.status_code >= 400)
        if answer.is_error:
            assert envelope_of(answer)["code"] == tagged.json()["error"]["code"]
