"""Tag over HTTP (JSON), lists with filters and keyset pages, kinds, sessions."""

from __future__ import annotations

import base64
import hashlib

import orjson

from artifacts_app.access import bearer_token, caller_from_authorization
from tests.rest.conftest import World, bearer


def post(client, world, payload):
    return client.post(
        "/reviewer/v1/artifacts",
        data=orjson.dumps(payload),
        content_type="application/json",
        **bearer(world.agent_key),
    )


def test_tag_created_then_replaced_keeps_id_and_created_at(world: World, client):
    first = post(
        client,
        world,
        {
            "kind": "reviewed-pr",
            "key": "https://x/9",
            "data": {"url": "https://x/9"},
            "title": "T",
            "sessionId": world.alice_session,
            "turnId": "t-1",
            "contents": "# review",
            "contentType": "text/markdown",
        },
    )
    assert first.status_code == 201
    one = orjson.loads(first.content)
    assert one["data"] == {"url": "https://x/9", "verdict": "comment"}
    assert one["content"]["contentType"] == "text/markdown"
    assert one["createdAt"].endswith("Z") and len(one["createdAt"]) == 24
    second = post(
        client,
        world,
        {
            "kind": "reviewed-pr",
            "key": "https://x/9",
            "data": {"url": "https://x/9", "verdict": "approve"},
            "sessionId": world.alice_session,
        },
    )
    assert second.status_code == 200
    two = orjson.loads(second.content)
    assert two["id"] == one["id"] and two["createdAt"] == one["createdAt"]
    assert two["title"] is None and two["turnId"] is None and two["source"] == "host"
    assert two["content"] == one["content"]  # same session: content kept


def test_tag_base64_contents_default_type(world: World, client):
    made = post(
        client,
        world,
        {
            "kind": "report",
            "data": {"n": 1},
            "contentsBase64": base64.b64encode(b"\x00\x01").decode(),
        },
    )
    assert made.status_code == 201
    assert orjson.loads(made.content)["content"]["contentType"] == "application/octet-stream"
    text = post(client, world, {"kind": "report", "data": {"n": 1}, "contents": "é"})
    assert orjson.loads(text.content)["content"] == {
        "size": 2,
        "contentType": "text/plain; charset=utf-8",
        "sha256": hashlib.sha256("é".encode()).hexdigest(),
    }


def ids(response) -> list[str]:
    return [row["id"] for row in orjson.loads(response.content)["results"]]


def test_list_pages_newest_first_with_absolute_next(world: World, client):
    key = bearer(world.agent_key)
    everything = ids(client.get("/reviewer/v1/artifacts?limit=500", **key))
    assert set(everything) == world.all_ids()
    walked: list[str] = []
    url = "/reviewer/v1/artifacts?limit=2"
    while url:
        page = orjson.loads(client.get(url, **key).content)
        walked += [row["id"] for row in page["results"]]
        url = page["next"]
        if url:
            assert url.startswith("http://testserver/reviewer/v1/artifacts?") and "limit=2" in url
    assert walked == everything
    stamps = [
        row["updatedAt"]
        for row in orjson.loads(client.get("/reviewer/v1/artifacts", **key).content)["results"]
    ]
    assert stamps == sorted(stamps, reverse=True)


def test_list_filters(world: World, client):
    key = bearer(world.agent_key)
    assert set(
        ids(client.get(f"/reviewer/v1/artifacts?sessionId={world.bob_session}", **key))
    ) == set(world.bob_ids)
    assert ids(client.get("/reviewer/v1/artifacts?sessionId=s-none", **key)) == []
    assert ids(client.get("/reviewer/v1/artifacts?kind=report", **key)) == []
    assert len(
        ids(client.get("/reviewer/v1/artifacts?kind=reviewed-pr&source=host", **key))
    ) == len(world.all_ids())
    assert ids(client.get("/reviewer/v1/artifacts?source=model", **key)) == []
    assert ids(client.get("/reviewer/v1/artifacts?key=https://x/pr/5", **key)) == world.loose_ids
    # A user's filter cannot widen what it sees.
    assert (
        ids(
            client.get(
                f"/reviewer/v1/artifacts?sessionId={world.bob_session}", **bearer(world.alice_token)
            )
        )
        == []
    )


def test_sessions_pages_and_get(world: World, client):
    key = bearer(world.agent_key)
    page = orjson.loads(client.get("/reviewer/v1/sessions?limit=1", **key).content)
    assert [row["id"] for row in page["results"]] == [world.bob_session]
    second = orjson.loads(client.get(page["next"], **key).content)
    assert [row["id"] for row in second["results"]] == [world.alice_session] and second[
        "next"
    ] is None
    one = orjson.loads(client.get(f"/reviewer/v1/sessions/{world.alice_session}", **key).content)
    assert one["id"] == world.alice_session and one["owner"] == "alice"


def test_kinds(world: World, client):
    got = orjson.loads(
        client.get("/reviewer/v1/artifacts/kinds", **bearer(world.agent_key)).content
    )
    assert got["max"] == 1000 and got["agentTool"] is True
    names = {kind["name"]: kind for kind in got["kinds"]}
    assert names["report"]["schema"] is None
    assert names["reviewed-pr"]["schema"]["required"] == ["url"]
    free = orjson.loads(client.get("/other/v1/artifacts/kinds", **bearer(world.other_key)).content)
    assert free == {"kinds": [], "max": 100, "agentTool": False, "keepVersions": 10}


def test_delete_takes_the_record_and_its_content(world: World, client):
    key = bearer(world.agent_key)
    assert client.delete(f"/reviewer/v1/artifacts/{world.content_id}", **key).status_code == 204
    assert client.get(f"/reviewer/v1/artifacts/{world.content_id}", **key).status_code == 404
    assert (
        client.get(f"/reviewer/v1/artifacts/{world.content_id}/content", **key).status_code == 404
    )
    assert client.delete(f"/reviewer/v1/artifacts/{world.content_id}", **key).status_code == 404


def test_caller_from_authorization_is_shared_with_websockets(world: World):
    assert bearer_token("Bearer abc") == "abc" and bearer_token(b"bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None and bearer_token(None) is None
    assert caller_from_authorization(f"Bearer {world.agent_key}").agent_id == world.agent.pk
    assert caller_from_authorization(f"Bearer {world.alice_token}").user.username == "alice"
    assert caller_from_authorization("Bearer aak_nope") is None
    assert caller_from_authorization(None) is None
