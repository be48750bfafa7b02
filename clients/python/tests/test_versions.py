"""Versions, pins, diffs, restore and the ``moved`` event through the kit, against the live daphne."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agent_artifacts_client import ArtifactsClient, AsyncArtifactsClient, ClientError
from conftest import Served


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(served: Served):
    with ArtifactsClient(served.base, served.key, "reviewer", backoff=0.01) as c:
        yield c


@pytest.fixture
def history(client):
    """A keyed record tagged three times: v1 with content, v2 a new verdict, v3 a new title."""
    url = unique("https://x/pull")
    client.tag(kind="reviewed-pr", key=url, data={"url": url}, contents="first")
    client.tag(kind="reviewed-pr", key=url, data={"url": url, "verdict": "approve"})
    record = client.tag(
        kind="reviewed-pr", key=url, title="T", data={"url": url, "verdict": "approve"},
        contents=b"\x00third", content_type="application/x-bin",
    )  # fmt: skip
    return record


def test_versions_newest_first_each_as_its_tag_stored_it(client, history):
    assert history.version == 3
    versions = list(client.versions(history.id, page_size=2))  # walks the pages
    assert [v.version for v in versions] == [3, 2, 1]
    assert versions[2].data["verdict"] == "comment" and versions[0].title == "T"
    assert all(v.id == history.id for v in versions)
    one = client.version(history.id, 1)
    assert one == versions[2] and one.content.content_type.startswith("text/plain")
    assert b"".join(client.content(history.id, version=1)) == b"first"
    assert b"".join(client.content(history.id, version=2)) == b"first"  # a re-tag keeps it
    assert b"".join(client.content(history.id, version=3)) == b"\x00third"


def test_diff_between_versions_names_fields_and_patches_data(client, history):
    diff = client.diff(history.id, 3)
    assert (diff["from"], diff["to"]) == (2, 3)
    assert diff["fields"]["title"] == {"from": None, "to": "T"} and "content" in diff["fields"]
    assert diff["data"] == []
    older = client.diff(history.id, 3, from_=1)
    assert older["from"] == 1
    assert older["data"] == [{"op": "replace", "path": "/verdict", "value": "approve"}]


def test_restore_makes_a_new_version_from_an_old_one(client, history):
    restored = client.restore(history.id, 1)
    assert restored.version == 4 and restored.data["verdict"] == "comment"
    assert restored.source == "host" and client.get(history.id) == restored
    assert [v.version for v in client.versions(history.id)] == [4, 3, 2, 1]


def test_pin_and_unpin(client, history, served):
    assert client.pin(history.id).pinned is True
    assert client.get(history.id).pinned is True
    assert client.pin(history.id).pinned is True  # pinning twice is still pinned
    assert client.unpin(history.id).pinned is False
    with ArtifactsClient(served.base, served.staff_token, "reviewer") as stan:
        assert stan.pin(history.id).pinned is True  # staff may pin
        assert stan.unpin(history.id).pinned is False


def test_a_pinned_record_is_never_evicted_and_a_full_pinned_agent_refuses_new_records(served):
    with ArtifactsClient(served.base, served.tiny_key, "tiny") as tiny:
        for record in tiny.list():  # max 2: start from an empty agent
            tiny.delete(record.id)
        first = tiny.tag(key=unique("a"), data=1)
        second = tiny.tag(key=unique("b"), data=2)
        tiny.pin(first.id)
        third = tiny.tag(key=unique("c"), data=3)  # evicts the unpinned one
        assert {r.id for r in tiny.list()} == {first.id, third.id}
        with pytest.raises(ClientError) as err:
            tiny.get(second.id)
        assert err.value.status == 404
        tiny.pin(third.id)
        with pytest.raises(ClientError) as err:
            tiny.tag(key=unique("d"), data=4)
        assert (err.value.status, err.value.code) == (409, "cap_reached")
        assert {r.id for r in tiny.list()} == {first.id, third.id}  # nothing changed
        tiny.unpin(third.id)
        assert tiny.tag(key=unique("e"), data=5).pinned is False


@pytest.mark.parametrize(
    ("call", "status", "code"),
    [
        (lambda c, i: c.version(i, 0), 400, "invalid_version"),
        (lambda c, i: c.version(i, 99), 404, "unknown_version"),
        (lambda c, i: c.version("art_missing", 1), 404, "unknown_artifact"),
        (lambda c, i: list(c.versions("art_missing")), 404, "unknown_artifact"),
        (lambda c, i: c.diff(i, 3, from_=0), 400, "invalid_version"),
        (lambda c, i: c.restore(i, 99), 404, "unknown_version"),
        (lambda c, i: c.pin("art_missing"), 404, "unknown_artifact"),
        (lambda c, i: list(c.content(i, version=99)), 404, "unknown_version"),
    ],
)
def test_version_refusals(client, history, call, status, code):
    with pytest.raises(ClientError) as err:
        call(client, history.id)
    assert (err.value.status, err.value.code) == (status, code), err.value
    assert err.value.message


def test_a_version_without_content_is_a_404_no_content(client):
    record = client.tag(kind="report", key=unique("plain"), data="no blob")
    with pytest.raises(ClientError) as err:
        list(client.content(record.id, version=1))
    assert (err.value.status, err.value.code) == (404, "no_content")


def test_a_version_number_must_be_an_int():
    with ArtifactsClient("http://127.0.0.1:1", "t", "a") as offline:
        with pytest.raises(TypeError, match="version number"):
            offline.version("art_x", "1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="version number"):
            offline.restore("art_x", True)


def test_users_and_staff_have_their_rights_on_history(client, served):
    sid = client.create_session(id=unique("uma"), owner="uma")["id"]
    key = unique("mine")
    record = client.tag(kind="report", key=key, data="a", session_id=sid)
    client.tag(kind="report", key=key, data="b", session_id=sid)
    with ArtifactsClient(served.base, served.user_token, "reviewer") as uma:
        assert [v.data for v in uma.versions(record.id)] == ["b", "a"]
        assert uma.diff(record.id, 2)["data"] == [{"op": "replace", "path": "", "value": "b"}]
        for refused in (lambda: uma.restore(record.id, 1), lambda: uma.pin(record.id)):
            with pytest.raises(ClientError) as err:
                refused()
            assert err.value.status == 403
    with ArtifactsClient(served.base, served.staff_token, "reviewer") as stan:
        with pytest.raises(ClientError) as err:
            stan.restore(record.id, 1)
        assert err.value.status == 403


async def test_async_twin_has_the_history_methods(served: Served):
    async with AsyncArtifactsClient(served.base, served.key, "reviewer") as c:
        key = unique("async-h")
        await c.tag(kind="report", key=key, data="one", contents="1")
        record = await c.tag(kind="report", key=key, data="two", contents="2")
        assert [v.version async for v in c.versions(record.id)] == [2, 1]
        assert (await c.version(record.id, 1)).data == "one"
        assert b"".join([x async for x in await c.content(record.id, version=1)]) == b"1"
        assert (await c.diff(record.id, 2))["from"] == 1
        assert (await c.restore(record.id, 1)).version == 3
        assert (await c.pin(record.id)).pinned and not (await c.unpin(record.id)).pinned


async def test_a_record_moved_out_of_a_session_leaves_its_stream_as_moved(served: Served):
    """The old session's viewer sees ``artifact.deleted`` with reason ``moved`` and never the
    record's new data; the new session's viewer sees the tag."""
    async with AsyncArtifactsClient(served.base, served.key, "reviewer") as c:
        old = (await c.create_session())["id"]
        new = (await c.create_session())["id"]
        key = unique("mover")
        await c.tag(kind="report", key=key, data="in old", session_id=old)
        await c.tag(kind="report", key=key, data="secret of new", session_id=new)
        marker = unique("marker")  # the last event on the old stream: read until it comes
        await c.tag(kind="report", key=marker, data="m", session_id=old)

        async def read(sid: str, until: str) -> list[dict]:
            seen = []
            async for event in c.subscribe(session_id=sid, after=0):
                seen.append(event)
                if event["record"].get("key") == until:
                    return seen
            return seen

        old_events = await asyncio.wait_for(read(old, marker), 15)
        new_events = await asyncio.wait_for(read(new, key), 15)
    mine = [e for e in old_events if e["record"].get("key") == key]
    assert [(e["type"], e.get("reason")) for e in mine] == [
        ("artifact.tagged", None),
        ("artifact.deleted", "moved"),
    ]
    assert all(e["record"].get("data") != "secret of new" for e in old_events)
    assert new_events[-1]["type"] == "artifact.tagged"
    assert new_events[-1]["record"]["data"] == "secret of new"
