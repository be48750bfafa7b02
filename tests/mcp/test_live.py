"""The MCP server with the official SDK client over real HTTP against a live daphne (API.md "MCP")."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time

import httpx
import mcp_types as types
import pytest
from channels.db import database_sync_to_async
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError

from artifacts_app import services
from tests.mcp.conftest import World, list_all, mcp, rest, rest_ids
from tests.mcp.test_refusals import envelope_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MiB = 1024 * 1024


async def _tag(live, token: str, **fields) -> dict:
    fields.setdefault("kind", "report")
    response = await rest(live, "POST", "/reviewer/v1/artifacts", token, json=fields)
    assert response.status_code in (200, 201), response.text
    return response.json()


async def test_initialize_2025_session_and_2026_discover(world: World, live):
    async with mcp(live, world.agent_key) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "agent-artifacts"
        caps = client.server_capabilities.resources
        assert caps is not None and caps.subscribe and caps.list_changed
    async with mcp(live, world.agent_key, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        templates = await client.list_resource_templates()
        assert {t.uri_template for t in templates.resource_templates} == {
            "artifact://reviewer/{id}",
            "artifact://reviewer/{id}/versions/{version}",
        }


@pytest.mark.parametrize(
    ("path", "token", "status", "code"),
    [
        ("/reviewer/mcp", None, 401, "not_authenticated"),
        ("/reviewer/mcp", "aak_00000000_nope", 401, "invalid_token"),
        ("/nosuch/mcp", None, 404, "unknown_agent"),
        ("/other/mcp", "agent", 403, "wrong_agent"),
    ],
)
async def test_the_door_answers_the_envelope_before_the_sdk(
    world: World, live, path, token, status, code
):
    token = world.agent_key if token == "agent" else token
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    response = await rest(live, "POST", path, token, json=body)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_host_outside_allowed_hosts_is_refused(world: World, live):
    answer = await rest(
        live, "POST", "/reviewer/mcp", world.agent_key, headers={"Host": "evil.test"}
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_host"


async def test_resources_page_newest_updated_first_like_rest(world: World, live):
    tag = database_sync_to_async(services.artifact_tag)
    for i in range(60):  # more than one page (50)
        await tag(agent=world.agent, kind="report", key=f"page-{i}", data=str(i))
    async with mcp(live, world.agent_key) as client:
        first = await client.list_resources()
        assert len(first.resources) == 50 and first.next_cursor
        uris = await list_all(client)
    expected = await rest_ids(live, world.agent_key)
    assert uris == [f"artifact://reviewer/{rid}" for rid in expected]
    assert len(uris) == len(world.all_ids()) + 60


async def test_read_text_binary_large_and_a_version(world: World, live):
    key = world.agent_key
    text = await _tag(
        live, key, key="t", data={"n": 1}, contents="# Hi\n", contentType="text/markdown"
    )
    raw = bytes(range(256)) * 4
    binary = await _tag(
        live,
        key,
        key="b",
        data={},
        contentsBase64=base64.b64encode(raw).decode(),
        contentType="image/png",
    )
    big = os.urandom(MiB + 10)
    response = await rest(
        live,
        "POST",
        "/reviewer/v1/artifacts",
        key,
        data={"record": json.dumps({"kind": "report", "key": "big", "data": {}})},
        files={"contents": ("big.bin", big, "application/octet-stream")},
    )
    assert response.status_code == 201, response.text
    large = response.json()
    await _tag(live, key, key="t", data={"n": 2})  # version 2 of t, content kept

    async with mcp(live, key) as client:
        got = await client.read_resource(f"artifact://reviewer/{text['id']}")
        record, content = got.contents
        assert json.loads(record.text)["id"] == text["id"]
        assert json.loads(record.text)["version"] == 2
        assert isinstance(content, types.TextResourceContents)
        assert content.text == "# Hi\n" and content.mime_type == "text/markdown"

        got = await client.read_resource(f"artifact://reviewer/{binary['id']}")
        assert isinstance(got.contents[1], types.BlobResourceContents)
        assert base64.b64decode(got.contents[1].blob) == raw

        got = await client.read_resource(f"artifact://reviewer/{large['id']}")
        link = got.contents[1]
        assert link.mime_type == "text/uri-list"
        assert link.text == f"{live.base_url}/reviewer/v1/artifacts/{large['id']}/content"
        assert json.loads(got.contents[0].text)["contentUrl"] == link.text
        fetched = await rest(live, "GET", link.text, key)
        assert fetched.content == big

        got = await client.read_resource(f"artifact://reviewer/{text['id']}/versions/1")
        old = json.loads(got.contents[0].text)
        assert old["version"] == 1 and old["data"] == {"n": 1}
        assert got.contents[1].text == "# Hi\n"

        with pytest.raises(MCPError) as missing:
            await client.read_resource(f"artifact://reviewer/{text['id']}/versions/9")
        assert missing.value.error.code == -32002
        with pytest.raises(MCPError):
            await client.read_resource("artifact://other/art_x")


async def test_tools_tag_list_read_and_refusals(world: World, live):
    async with mcp(live, world.agent_key) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"tag_artifact", "list_artifacts", "read_artifact"}
        call = {"artifact": {"kind": "reviewed-pr", "key": "https://x/pr/99", "title": None}}
        call["artifact"]["data"] = {"url": "https://x/pr/99", "verdict": "approve"}
        tagged = await client.call_tool("tag_artifact", call)
        assert not tagged.is_error
        record = tagged.structured_content
        assert record["source"] == "model" and record["data"]["verdict"] == "approve"
        links = [c for c in tagged.content if isinstance(c, types.ResourceLink)]
        assert [str(link.uri) for link in links] == [f"artifact://reviewer/{record['id']}"]

        wrong = await client.call_tool(
            "tag_artifact", {"artifact": {"kind": "poem", "key": None, "title": None, "data": 1}}
        )
        assert wrong.is_error
        assert envelope_of(wrong)["details"]["field"] == "artifact.kind"
        assert "artifact.kind" in wrong.content[0].text and "reviewed-pr" in wrong.content[0].text

        page = await client.call_tool("list_artifacts", {"limit": 2})
        assert not page.is_error and len(page.structured_content["results"]) == 2
        rest_page = (
            await rest(live, "GET", "/reviewer/v1/artifacts?limit=2", world.agent_key)
        ).json()
        assert [r["id"] for r in page.structured_content["results"]] == [
            r["id"] for r in rest_page["results"]
        ]
        more = await client.call_tool(
            "list_artifacts", {"limit": 2, "cursor": page.structured_content["nextCursor"]}
        )
        assert more.structured_content["results"][0]["id"] not in {
            r["id"] for r in page.structured_content["results"]
        }
        bad = await client.call_tool("list_artifacts", {"limit": 0})
        assert bad.is_error and envelope_of(bad)["details"]["field"] == "limit"

        read = await client.call_tool("read_artifact", {"id": record["id"]})
        assert read.structured_content == record
        old = await client.call_tool("read_artifact", {"id": world.content_id, "version": 1})
        assert old.structured_content["version"] == 1
        assert old.structured_content["contentUrl"].endswith("/versions/1/content")
        missing = await client.call_tool("read_artifact", {"id": "art_nope"})
        assert missing.is_error and envelope_of(missing)["code"] == "unknown_artifact"
        no_id = await client.call_tool("read_artifact", {})
        assert no_id.is_error and "`id`" in no_id.content[0].text

    async with mcp(live, world.alice_token) as client:
        refused = await client.call_tool("tag_artifact", call)
        assert refused.is_error
        assert envelope_of(refused)["code"] == "forbidden"


async def test_a_session_answers_only_the_credential_that_opened_it(world: World, live):
    headers = {"Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    opened = await rest(
        live, "POST", "/reviewer/mcp", world.alice_token, json=init, headers=headers
    )
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    probe = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    for token, status in ((world.bob_token, 404), (world.alice_token, 200)):
        answer = await rest(
            live,
            "POST",
            "/reviewer/mcp",
            token,
            json=probe,
            headers={**headers, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"},
        )
        assert answer.status_code == status, answer.text


async def _next(inbox: asyncio.Queue, kind: type, timeout: float = 30) -> object:
    """The next notification of this type (others, such as list changes, are passed over)."""
    while True:
        message = await asyncio.wait_for(inbox.get(), timeout)
        root = getattr(message, "root", message)
        if isinstance(root, kind):
            return root


async def test_subscribe_updated_after_a_rest_tag_and_list_changed_after_a_delete(
    world: World, live
):
    inbox: asyncio.Queue = asyncio.Queue()
    target = world.alice_ids[0]
    async with mcp(live, world.alice_token, inbox=inbox) as client:
        await client.list_resources()
        await client.subscribe_resource(f"artifact://reviewer/{target}")
        await _tag(
            live,
            world.agent_key,
            kind="reviewed-pr",
            key="https://x/pr/0",
            data={"url": "https://x/pr/0", "verdict": "approve"},
            sessionId=world.alice_session,
        )
        updated = await _next(inbox, types.ResourceUpdatedNotification)
        assert updated.params.uri == f"artifact://reviewer/{target}"
        gone = await rest(
            live, "DELETE", f"/reviewer/v1/artifacts/{world.alice_ids[1]}", world.agent_key
        )
        assert gone.status_code == 204
        await _next(inbox, types.ResourceListChangedNotification)
        # The record moves into bob's session: alice sees it leave (updated, as a delete), then
        # nothing of what it holds there. Her other record's update is the next she gets.
        other = world.alice_ids[2]
        await client.subscribe_resource(f"artifact://reviewer/{other}")
        pr0 = {"kind": "reviewed-pr", "key": "https://x/pr/0"}
        for verdict in ("moved", "again"):
            await _tag(
                live,
                world.agent_key,
                **pr0,
                data={"url": "https://x/pr/0", "verdict": verdict},
                sessionId=world.bob_session,
            )
        await _tag(
            live,
            world.agent_key,
            kind="reviewed-pr",
            key="https://x/pr/2",
            data={"url": "https://x/pr/2"},
            sessionId=world.alice_session,
        )
        seen: list[str] = []
        while not seen or seen[-1] != f"artifact://reviewer/{other}":
            seen.append((await _next(inbox, types.ResourceUpdatedNotification)).params.uri)
        assert seen == [f"artifact://reviewer/{target}", f"artifact://reviewer/{other}"]


async def test_listen_on_the_2026_wire(world: World, live):
    async with mcp(live, world.agent_key, mode="auto") as client:
        uri = f"artifact://reviewer/{world.loose_ids[0]}"
        async with client.listen(resources_list_changed=True, resource_subscriptions=[uri]) as sub:
            await _tag(
                live,
                world.agent_key,
                kind="reviewed-pr",
                key="https://x/pr/5",
                data={"url": "https://x/pr/5"},
            )
            seen = set()
            async for event in sub:
                seen.add(type(event).__name__)
                if getattr(event, "uri", None) == uri:
                    break
            assert "ResourceUpdated" in seen


async def test_a_subscription_names_a_record_the_caller_may_read(world: World, live):
    async with mcp(live, world.bob_token) as client:
        with pytest.raises(MCPError):
            await client.subscribe_resource(f"artifact://reviewer/{world.alice_ids[0]}")


# --- revocation reaches open MCP streams (API.md "Limits") -------------------------------------

BOUND = 5.0  # a generous bound for failure; the latency seen is printed, not asserted


async def _rpc(live, token: str, session: str | None, body: dict) -> object:
    headers = {"Accept": "application/json, text/event-stream"}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
    return await rest(live, "POST", "/reviewer/mcp", token, json=body, headers=headers)


async def test_revoked_token_ends_the_standalone_get_stream(world: World, live):
    token = world.alice_token
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    opened = await _rpc(live, token, None, init)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await _rpc(live, token, session, initialized)).status_code == 202
    listed = {"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {}}
    assert (await _rpc(live, token, session, listed)).status_code == 200  # starts the watch
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "text/event-stream",
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-11-25",
    }
    lines: asyncio.Queue = asyncio.Queue()
    async with httpx.AsyncClient(base_url=live.base_url, timeout=30) as http:
        async with http.stream("GET", "/reviewer/mcp", headers=headers) as stream:
            assert stream.status_code == 200

            async def read() -> None:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        await lines.put(json.loads(line[5:]))
                await lines.put(None)  # the stream ended

            reader = asyncio.ensure_future(read())
            await _tag(live, world.agent_key, key="seen", data=1, sessionId=world.alice_session)
            message = await asyncio.wait_for(lines.get(), 30)  # delivering: the list changed
            assert message["method"] == "notifications/resources/list_changed"
            started = time.monotonic()
            await database_sync_to_async(services.token_revoke)(token=token)
            ended = await asyncio.wait_for(lines.get(), BOUND)
            print(
                f"\nMCP GET stream: ended {time.monotonic() - started:.3f} s after the revocation"
            )
            assert ended is None
            await _tag(live, world.agent_key, key="later", data=1, sessionId=world.alice_session)
            await reader
            assert lines.empty()
    again = await _rpc(live, token, session, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert again.status_code == 401


async def test_revoked_token_ends_listen_on_the_2026_wire(world: World, live):
    token = world.alice_token
    async with mcp(live, token, mode="auto") as client:
        async with client.listen(resources_list_changed=True) as changes:
            await _tag(live, world.agent_key, key="seen", data=1, sessionId=world.alice_session)
            events = changes.__aiter__()
            assert type(await asyncio.wait_for(events.__anext__(), 30)).__name__ == (
                "ResourcesListChanged"
            )
            started = time.monotonic()
            await database_sync_to_async(services.token_revoke)(token=token)

            # The answer to listen is an error that says why; the SDK ends the iteration with
            # SubscriptionLost, caused by it.
            with pytest.raises(SubscriptionLost) as lost:
                await asyncio.wait_for(events.__anext__(), BOUND)
            print(f"\nMCP listen: ended {time.monotonic() - started:.3f} s after the revocation")
            assert isinstance(lost.value.__cause__, MCPError)
            assert lost.value.__cause__.error.data["code"] == "invalid_token"


async def test_an_unrevoked_listener_keeps_its_notifications(world: World, live):
    async with (
        mcp(live, world.bob_token, mode="auto") as revoked,
        mcp(live, world.alice_token, mode="auto") as kept,
    ):
        async with (
            revoked.listen(resources_list_changed=True) as gone,
            kept.listen(resources_list_changed=True) as changes,
        ):
            await database_sync_to_async(services.token_revoke)(token=world.bob_token)
            with pytest.raises(SubscriptionLost):
                await asyncio.wait_for(gone.__aiter__().__anext__(), BOUND)
            await _tag(live, world.agent_key, key="later", data=1, sessionId=world.alice_session)
            event = await asyncio.wait_for(changes.__aiter__().__anext__(), 30)
            assert type(event).__name__ == "ResourcesListChanged"


async def test_list_artifacts_searches_with_q_and_where(world: World, live):
    async with mcp(live, world.agent_key) as client:
        found = await client.call_tool("list_artifacts", {"q": "hello"})
        assert not found.is_error
        assert [r["id"] for r in found.structured_content["results"]] == [world.content_id]
        where = {"url": {"$in": ["https://x/pr/0", "https://x/pr/1"]}}
        by_object = await client.call_tool("list_artifacts", {"where": where})
        by_text = await client.call_tool("list_artifacts", {"where": json.dumps(where)})
        rest_page = (
            await rest(
                live,
                "GET",
                "/reviewer/v1/artifacts?"
                + httpx.QueryParams({"where": json.dumps(where)}).__str__(),
                world.agent_key,
            )
        ).json()
        expected = [r["id"] for r in rest_page["results"]]
        assert len(expected) == 2
        assert [r["id"] for r in by_object.structured_content["results"]] == expected
        assert [r["id"] for r in by_text.structured_content["results"]] == expected
        bad = await client.call_tool("list_artifacts", {"where": {"url": {"$regex": "x"}}})
        assert bad.is_error and envelope_of(bad)["code"] == "invalid_query"
        assert envelope_of(bad)["details"]["part"] == "url.$regex"
        bad_q = await client.call_tool("list_artifacts", {"q": "x" * 600})
        assert bad_q.is_error and envelope_of(bad_q)["details"]["field"] == "q"
