"""The history routes over HTTP: wiring, access across sessions, content rules, errors."""

from __future__ import annotations

import jsonpatch
import orjson
import pytest

from artifacts_app import services
from artifacts_app.models import Event
from tests.rest.conftest import World, bearer, body

URL = "/reviewer/v1/artifacts"
PR = "https://github.com/o/r/pull/7"


def _json(response):
    return orjson.loads(response.content)


def tag(client, key: str, token: str, **fields):
    fields.setdefault("kind", "reviewed-pr")
    fields.setdefault("data", {"url": PR})
    return client.post(
        URL, orjson.dumps({"key": key, **fields}), content_type="application/json", **bearer(token)
    )


def get(client, path: str, token: str, **headers):
    return client.get(f"{URL}/{path}", **bearer(token), **headers)


@pytest.fixture
def moved(world: World, client):
    """A record tagged twice in alice's session (with content), then moved into bob's."""
    key = world.agent_key
    first = tag(
        client,
        PR,
        key,
        data={"url": PR, "verdict": "approve"},
        sessionId=world.alice_session,
        contents="# Alice's review",
        contentType="text/plain",
    )
    assert first.status_code == 201
    assert (
        tag(
            client, PR, key, data={"url": PR, "verdict": "comment"}, sessionId=world.alice_session
        ).status_code
        == 200
    )
    third = tag(
        client,
        PR,
        key,
        data={"url": PR, "verdict": "reject", "by": "bob"},
        sessionId=world.bob_session,
    )
    assert third.status_code == 200
    return _json(third)["id"]


def test_tag_answers_version_and_pinned_and_retag_counts_up(world: World, client):
    created = _json(tag(client, "k1", world.agent_key))
    assert (created["version"], created["pinned"]) == (1, False)
    again = tag(client, "k1", world.agent_key)
    assert again.status_code == 200 and _json(again)["version"] == 2
    listed = _json(client.get(f"{URL}?key=k1", **bearer(world.agent_key)))["results"]
    assert [(r["version"], r["pinned"]) for r in listed] == [(2, False)]
    assert _json(get(client, created["id"], world.agent_key))["version"] == 2


def test_versions_list_is_newest_first_and_paged(world: World, client):
    record_id = _json(tag(client, "paged", world.agent_key, title="t0"))["id"]
    for i in range(1, 5):
        tag(client, "paged", world.agent_key, title=f"t{i}")
    page = _json(get(client, f"{record_id}/versions?limit=2", world.agent_key))
    assert [(v["version"], v["title"]) for v in page["results"]] == [(5, "t4"), (4, "t3")]
    assert page["next"].startswith("http://testserver/reviewer/v1/artifacts/")
    second = _json(client.get(page["next"], **bearer(world.agent_key)))
    assert [v["version"] for v in second["results"]] == [3, 2]
    last = _json(client.get(second["next"], **bearer(world.agent_key)))
    assert [v["version"] for v in last["results"]] == [1] and last["next"] is None
    for query, code in (
        ("limit=0", "invalid_query"),
        ("cursor=%00", "invalid_query"),
        ("cursor=bm9wZQ", "invalid_cursor"),
    ):
        refused = get(client, f"{record_id}/versions?{query}", world.agent_key)
        assert refused.status_code == 400 and _json(refused)["error"]["code"] == code


def test_one_version_is_the_record_as_it_was(world: World, client, moved):
    v1 = _json(get(client, f"{moved}/versions/1", world.agent_key))
    record = _json(get(client, moved, world.agent_key))
    assert set(v1) == set(record)
    assert v1["version"] == 1 and record["version"] == 3
    assert v1["data"] == {"url": PR, "verdict": "approve"}
    assert v1["sessionId"] == world.alice_session and v1["content"]["size"] == 16
    assert v1["createdAt"] == record["createdAt"] and v1["updatedAt"] < record["updatedAt"]
    missing = get(client, f"{moved}/versions/9", world.agent_key)
    assert missing.status_code == 404 and _json(missing)["error"]["code"] == "unknown_version"
    for bad in ("0", "99999999999"):
        refused = get(client, f"{moved}/versions/{bad}", world.agent_key)
        assert refused.status_code in (400, 404)
        assert _json(refused)["error"]["code"] in ("invalid_version", "unknown_route")
    assert get(client, f"{moved}/versions/abc", world.agent_key).status_code == 404


def test_a_moved_record_never_shows_bob_what_it_held_in_alices_session(world: World, client, moved):
    bob = world.bob_token
    listed = _json(get(client, f"{moved}/versions", bob))["results"]
    assert [v["version"] for v in listed] == [3]
    assert "approve" not in str(listed)
    for path in (
        "versions/1",
        "versions/2",
        "versions/1/content",
        "versions/3/diff?from=1",
        "versions/2/diff",
    ):
        hidden = get(client, f"{moved}/{path}", bob)
        assert hidden.status_code == 404, path
        assert b"approve" not in hidden.content and b"Alice" not in hidden.content
    # The default `from` for bob: no earlier version he may see.
    assert get(client, f"{moved}/versions/3/diff", bob).status_code == 404
    # Alice sees her own versions (and their content), not bob's.
    alice = world.alice_token
    assert [v["version"] for v in _json(get(client, f"{moved}/versions", alice))["results"]] == [
        2,
        1,
    ]
    assert get(client, f"{moved}/versions/3", alice).status_code == 404
    assert body(get(client, f"{moved}/versions/1/content", alice)) == b"# Alice's review"
    # ... while the record itself, now in bob's session, is hidden from her.
    assert get(client, moved, alice).status_code == 404
    # The agent's key and staff see everything.
    for token in (world.agent_key, world.staff_token):
        assert len(_json(get(client, f"{moved}/versions", token))["results"]) == 3


def test_version_content_follows_the_content_rules(world: World, client, moved):
    key = world.agent_key
    response = get(client, f"{moved}/versions/1/content", key)
    assert response.status_code == 200 and body(response) == b"# Alice's review"
    etag = response["ETag"]
    assert response["Content-Type"] == "text/plain"
    assert response["Content-Disposition"].startswith("inline")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "sandbox"
    ranged = get(client, f"{moved}/versions/1/content", key, HTTP_RANGE="bytes=2-6")
    assert ranged.status_code == 206 and body(ranged) == b"Alice"
    assert ranged["Content-Range"] == "bytes 2-6/16"
    assert (
        get(client, f"{moved}/versions/1/content", key, HTTP_IF_NONE_MATCH=etag).status_code == 304
    )
    assert (
        get(client, f"{moved}/versions/1/content", key, HTTP_RANGE="bytes=99-").status_code == 416
    )
    none = get(client, f"{moved}/versions/3/content", key)
    assert none.status_code == 404 and _json(none)["error"]["code"] == "no_content"


def test_diff_over_http(world: World, client, moved):
    diff = _json(get(client, f"{moved}/versions/3/diff", world.agent_key))
    assert diff["from"] == 2 and diff["to"] == 3
    assert set(diff["fields"]) == {"sessionId", "content"}  # v2 carried alice's content; v3 not
    assert diff["fields"]["sessionId"] == {"from": world.alice_session, "to": world.bob_session}
    v2 = _json(get(client, f"{moved}/versions/2", world.agent_key))["data"]
    v3 = _json(get(client, f"{moved}/versions/3", world.agent_key))["data"]
    assert jsonpatch.apply_patch(v2, diff["data"]) == v3
    from1 = _json(get(client, f"{moved}/versions/3/diff?from=1", world.agent_key))
    assert from1["from"] == 1
    assert (
        from1["fields"]["content"]["from"]["size"] == 16
        and from1["fields"]["content"]["to"] is None
    )
    # A NUL never reaches the view: the door (door.py) refuses it in any query first.
    for bad, code in (
        ("x", "invalid_version"),
        ("0", "invalid_version"),
        ("-1", "invalid_version"),
        ("1.5", "invalid_version"),
        ("%00", "invalid_query"),
    ):
        refused = get(client, f"{moved}/versions/3/diff?from={bad}", world.agent_key)
        assert refused.status_code == 400 and _json(refused)["error"]["code"] == code
    gone = get(client, f"{moved}/versions/3/diff?from=7", world.agent_key)
    assert gone.status_code == 404


def test_restore_over_http(world: World, client, moved):
    restored = client.post(f"{URL}/{moved}/versions/1/restore", **bearer(world.agent_key))
    assert restored.status_code == 200
    record = _json(restored)
    assert record["version"] == 4 and record["data"]["verdict"] == "approve"
    assert record["sessionId"] == world.bob_session  # the record's current session
    assert record["content"] is None  # version 1's content stays in alice's session
    assert record["source"] == "host"
    event = Event.objects.filter(type="artifact.tagged").order_by("-seq").first()
    assert event.payload["record"]["version"] == 4 and event.session_sid == world.bob_session
    for token in (world.bob_token, world.staff_token):
        refused = client.post(f"{URL}/{moved}/versions/1/restore", **bearer(token))
        assert refused.status_code == 403
    missing = client.post(f"{URL}/{moved}/versions/99/restore", **bearer(world.agent_key))
    assert missing.status_code == 404 and _json(missing)["error"]["code"] == "unknown_version"
    unkeyed = world.loose_ids[0]
    services.artifact_tag(agent="reviewer", kind="report", data={})  # an unkeyed record
    loose = _json(
        client.post(
            URL,
            orjson.dumps({"kind": "report", "data": {}}),
            content_type="application/json",
            **bearer(world.agent_key),
        )
    )["id"]
    conflict = client.post(f"{URL}/{loose}/versions/1/restore", **bearer(world.agent_key))
    assert conflict.status_code == 409 and _json(conflict)["error"]["code"] == "not_keyed"
    assert unkeyed  # the world's keyed sessionless record stays as it was
    assert (
        client.get(f"{URL}/{moved}/versions/1/restore", **bearer(world.agent_key)).status_code
        == 405
    )


def test_pin_and_unpin_over_http(world: World, client):
    record_id = world.alice_ids[0]
    pinned = client.put(f"{URL}/{record_id}/pin", **bearer(world.agent_key))
    assert pinned.status_code == 200 and _json(pinned)["pinned"] is True
    assert _json(get(client, record_id, world.alice_token))["pinned"] is True
    unpinned = client.delete(f"{URL}/{record_id}/pin", **bearer(world.staff_token))
    assert unpinned.status_code == 200 and _json(unpinned)["pinned"] is False
    events = Event.objects.filter(type="artifact.pinned").order_by("seq")
    assert [(e.payload["record"]["pinned"], e.payload["sessionId"]) for e in events] == [
        (True, world.alice_session),
        (False, world.alice_session),
    ]
    assert client.put(f"{URL}/art_nope/pin", **bearer(world.agent_key)).status_code == 404
    assert client.put(f"{URL}/{record_id}/pin", **bearer(world.alice_token)).status_code == 403


def test_cap_reached_over_http_changes_nothing(db, client):
    agent = services.agent_create(slug="tiny", max_artifacts=2)
    _, key = services.agent_key_create(agent=agent)
    for name in ("a", "b"):
        record_id = _json(
            client.post(
                "/tiny/v1/artifacts",
                orjson.dumps({"key": name, "data": {}}),
                content_type="application/json",
                **bearer(key),
            )
        )["id"]
        assert client.put(f"/tiny/v1/artifacts/{record_id}/pin", **bearer(key)).status_code == 200
    before = Event.objects.count()
    refused = client.post(
        "/tiny/v1/artifacts",
        orjson.dumps({"key": "c", "data": {}, "contents": "x"}),
        content_type="application/json",
        **bearer(key),
    )
    assert refused.status_code == 409
    error = _json(refused)["error"]
    assert (
        error["code"] == "cap_reached" and "unpin or delete one, or raise max" in error["message"]
    )
    assert Event.objects.count() == before
    listed = _json(client.get("/tiny/v1/artifacts", **bearer(key)))["results"]
    assert sorted(r["key"] for r in listed) == ["a", "b"]
