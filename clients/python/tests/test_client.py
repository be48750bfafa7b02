"""ArtifactsClient and AsyncArtifactsClient against a live daphne of the server."""

from __future__ import annotations

import hashlib
import io
import os
import uuid

import pytest
from agent_artifacts_client import ArtifactsClient, AsyncArtifactsClient, ClientError
from conftest import Served
from proxies import DroppingProxy


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def client(served: Served):
    with ArtifactsClient(served.base, served.key, "reviewer", backoff=0.01) as c:
        yield c


def test_tag_get_and_delete(client):
    key = unique("https://x/pull")
    record = client.tag(kind="reviewed-pr", key=key, title="PR", data={"url": key})
    assert record.id.startswith("art_") and record.data == {"url": key, "verdict": "comment"}
    assert record.source == "host" and record.created_at.tzinfo is not None
    assert client.get(record.id) == record
    client.delete(record.id)
    with pytest.raises(ClientError) as err:
        client.get(record.id)
    assert err.value.status == 404 and err.value.code


def test_list_iterates_all_pages_of_120_records(client):
    kind_key = unique("page")
    sid = client.create_session(id=unique("s"))["id"]
    made = [
        client.tag(kind="report", key=f"{kind_key}-{i}", data=f"r{i}", session_id=sid).id
        for i in range(120)
    ]
    listed = list(client.list(session_id=sid, page_size=50))
    assert [r.id for r in listed] == list(reversed(made))  # newest-updated first
    first, next_url = client.page(session_id=sid, limit=50)
    assert len(first) == 50 and next_url and next_url.startswith("http")


def test_contents_inline_multipart_and_streamed_download(client, tmp_path):
    text = client.tag(kind="report", data="t", contents="# hello", content_type="text/markdown")
    assert b"".join(client.content(text.id)) == b"# hello"
    blob = os.urandom(5 * 1024 * 1024 + 7)  # past the inline limit: multipart, streamed
    source = tmp_path / "big.bin"
    source.write_bytes(blob)
    big = client.tag(kind="report", key=unique("big"), data="b", contents=source)
    assert big.content.sha256 == hashlib.sha256(blob).hexdigest()
    target = tmp_path / "down.bin"
    assert client.content(big.id, to=target) == len(blob)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == big.content.sha256
    small = client.tag(
        kind="report", data="s", contents=b"\x00\x01", content_type="application/x-bin"
    )
    sink = io.BytesIO()
    client.content(small.id, to=sink)
    assert sink.getvalue() == b"\x00\x01"
    with pytest.raises(ClientError) as err:
        client.content(client.tag(kind="report", data="none").id, to=tmp_path / "x")
    assert err.value.status == 404 and err.value.code == "no_content"


def test_file_object_contents_are_streamed(client):
    payload = os.urandom(4096)
    record = client.tag(
        kind="report", data="f", contents=io.BytesIO(payload), content_type="image/png"
    )
    assert record.content.size == 4096 and record.content.content_type == "image/png"


def test_sessions_kinds_and_tool(client, served):
    sid = unique("s")
    made = client.create_session(id=sid, owner="uma")
    assert made["id"] == sid and made["owner"] == "uma"
    assert client.session(sid)["owner"] == "uma"
    assert sid in {s["id"] for s in client.sessions()}
    kinds = client.kinds()
    assert {k["name"] for k in kinds["kinds"]} == {"reviewed-pr", "report"} and kinds["agentTool"]
    assert client.tool()["name"] == "tag_artifact"
    assert client.tool("openai")["function"]["strict"] is True
    with pytest.raises(ClientError) as err:
        client.tool("gemini")
    assert err.value.code == "unknown_format" and err.value.status == 400


def test_run_tool_tags_as_model_and_returns_refusals_as_results(client):
    key = unique("https://x/pull")
    call = {
        "artifact": {
            "kind": "reviewed-pr",
            "key": key,
            "title": None,
            "data": {"url": key, "verdict": "approve"},
        }
    }
    result = client.run_tool(call, turn_id="t-1")
    assert (
        result.ok
        and result.created
        and result.record.source == "model"
        and result.record.turn_id == "t-1"
    )
    assert client.run_tool(call).created is False
    refused = client.run_tool({"artifact": {**call["artifact"], "data": {"verdict": "x"}}})
    assert not refused.ok and refused.details["field"] == "artifact.data.url"
    assert refused.anthropic("toolu_1")["is_error"] is True
    with pytest.raises(ClientError) as err:  # not the model's to fix: raised
        client.run_tool(call, session_id="s-missing")
    assert err.value.code == "unknown_session"


@pytest.mark.parametrize(
    ("who", "call", "status", "code"),
    [
        ("bad", lambda c: c.kinds(), 401, "invalid_token"),
        ("user", lambda c: c.tag(kind="report", data="x"), 403, "forbidden"),
        ("staff", lambda c: c.run_tool({"artifact": {}}), 403, "forbidden"),
        ("key", lambda c: c.tag(kind="nope", data="x"), 400, "unknown_kind"),
        ("key", lambda c: c.tag(kind="report", data=None), 400, "data_required"),
        ("key", lambda c: c.get("art_missing"), 404, "unknown_artifact"),
        ("key", lambda c: c.create_session(id="s bad"), 400, "invalid_session_id"),
    ],
)
def test_errors_surface_code_status_and_message(served, who, call, status, code):
    token = {
        "bad": "aak_nope_nope",
        "user": served.user_token,
        "staff": served.staff_token,
        "key": served.key,
    }[who]
    with ArtifactsClient(served.base, token, "reviewer") as c, pytest.raises(ClientError) as err:
        call(c)
    assert (err.value.status, err.value.code) == (status, code), err.value
    assert err.value.message


def test_unknown_agent_is_a_404_client_error(served):
    with ArtifactsClient(served.base, served.key, "nosuch") as c, pytest.raises(ClientError) as err:
        c.kinds()
    assert err.value.status == 404 and err.value.code == "unknown_agent"


def test_keyed_tag_retried_after_a_dropped_connection_leaves_one_record(served, client):
    proxy = DroppingProxy(served.port, drop=1)
    key = unique("retry")
    try:
        with ArtifactsClient(proxy.base, served.key, "reviewer", backoff=0.01) as through:
            record = through.tag(kind="report", key=key, data="once")
    finally:
        proxy.close()
    assert proxy.connections == 2  # the dropped one, and the retry
    assert [r.id for r in client.list(key=key)] == [record.id]


def test_unkeyed_tag_is_not_retried_after_a_dropped_connection(served, client):
    proxy = DroppingProxy(served.port, drop=5)
    marker = unique("unkeyed")
    try:
        with ArtifactsClient(proxy.base, served.key, "reviewer", backoff=0.01) as through:
            with pytest.raises(ClientError) as err:
                through.tag(kind="report", data=marker)
    finally:
        proxy.close()
    assert err.value.code == "connection_error" and "not retried" in err.value.message
    assert proxy.connections == 1
    assert sum(1 for r in client.list(kind="report") if r.data == marker) == 1  # it did land once


def test_refused_connection_is_retried_then_reported(served):
    with ArtifactsClient(
        f"http://127.0.0.1:{1}", served.key, "reviewer", retries=2, backoff=0.01
    ) as c:
        with pytest.raises(ClientError) as err:
            c.tag(kind="report", data="x")
    assert err.value.code == "connection_error" and "3 attempt" in err.value.message


async def test_async_twin_does_the_same(served, tmp_path):
    async with AsyncArtifactsClient(served.base, served.key, "reviewer", backoff=0.01) as c:
        key = unique("async")
        record = await c.tag(kind="report", key=key, data="a", contents=b"bytes!")
        assert (await c.get(record.id)).id == record.id
        assert [r.id async for r in c.list(key=key)] == [record.id]
        assert await c.content(record.id, to=tmp_path / "a.bin") == 6
        chunks = [chunk async for chunk in await c.content(record.id)]
        assert b"".join(chunks) == b"bytes!"
        assert (await c.kinds())["agentTool"] is True
        assert (await c.tool("openai-responses"))["strict"] is True
        result = await c.run_tool(
            {"artifact": {"kind": "report", "key": None, "title": None, "data": "m"}}
        )
        assert result.ok and result.record.source == "model"
        sid = (await c.create_session())["id"]
        assert sid in {s["id"] async for s in c.sessions()}
        await c.delete(record.id)
        with pytest.raises(ClientError) as err:
            await c.get(record.id)
        assert err.value.status == 404


async def test_async_twin_streams_a_big_file(served, tmp_path):
    blob = os.urandom(5 * 1024 * 1024 + 1)
    source = tmp_path / "big.bin"
    source.write_bytes(blob)
    async with AsyncArtifactsClient(served.base, served.key, "reviewer") as c:
        record = await c.tag(kind="report", key=unique("abig"), data="b", contents=source)
        assert record.content.sha256 == hashlib.sha256(blob).hexdigest()
        with open(source, "rb") as handle:
            again = await c.tag(kind="report", key=unique("afile"), data="f", contents=handle)
        assert again.content.size == len(blob)


def test_freeform_agent_takes_any_kind_and_defaults_to_artifact(served):
    with ArtifactsClient(served.base, served.notes_key, "notes") as notes:
        assert notes.kinds()["kinds"] == [] and notes.kinds()["agentTool"] is False
        record = notes.tag(data={"any": ["json", 1]})
        assert record.kind == "artifact" and record.data == {"any": ["json", 1]}
        assert notes.tag(kind="whatever.v2", data=3).kind == "whatever.v2"
        with pytest.raises(ClientError) as err:
            notes.tool()
        assert err.value.status == 404


def test_a_key_of_one_agent_is_refused_on_another(served):
    with (
        ArtifactsClient(served.base, served.notes_key, "reviewer") as c,
        pytest.raises(ClientError) as err,
    ):
        c.list().__next__()
    assert err.value.status == 403


def test_a_user_sees_only_the_sessions_it_owns_and_staff_may_delete(served, client):
    mine = client.create_session(id=unique("uma"), owner="uma")["id"]
    other = client.create_session(id=unique("other"))["id"]
    seen = client.tag(kind="report", data="for uma", session_id=mine)
    hidden = client.tag(kind="report", data="not for uma", session_id=other)
    with ArtifactsClient(served.base, served.user_token, "reviewer") as uma:
        assert uma.get(seen.id) == seen
        assert [r.id for r in uma.list(session_id=mine)] == [seen.id]
        assert {s["id"] for s in uma.sessions()} >= {mine} and other not in {
            s["id"] for s in uma.sessions()
        }
        with pytest.raises(ClientError) as err:
            uma.get(hidden.id)  # hidden and missing look the same
        assert err.value.status == 404
        with pytest.raises(ClientError) as err:
            uma.delete(seen.id)
        assert err.value.status == 403
    with ArtifactsClient(served.base, served.staff_token, "reviewer") as stan:
        assert stan.get(hidden.id) == hidden
        stan.delete(hidden.id)
    with pytest.raises(ClientError) as err:
        client.get(hidden.id)
    assert err.value.status == 404


def test_data_past_the_limit_is_a_413_that_says_which_limit(client):
    with pytest.raises(ClientError) as err:
        client.tag(kind="report", data="x" * (1024 * 1024 + 1))
    assert (err.value.status, err.value.code) == (413, "data_too_large")
    assert "ARTIFACTS_MAX_DATA_BYTES" in err.value.message and err.value.details["limit"] == 1048576


def test_schema_refusal_carries_the_validator_details(client):
    with pytest.raises(ClientError) as err:
        client.tag(kind="reviewed-pr", data={"verdict": "approve"})
    assert err.value.status == 400 and err.value.code == "schema_invalid"
    assert any(d["loc"] == ["url"] for d in err.value.details), err.value.details


def test_list_searches_with_q_and_where(client):
    marker = unique("quandong")
    made = [
        client.tag(kind="report", key=f"{marker}-{i}", data=f"{marker} {i}", title=f"T{i}")
        for i in range(3)
    ]
    found = list(client.list(q=marker.replace("-", " ")))
    assert [r.id for r in found] == [r.id for r in reversed(made)]
    pr = unique("https://x/search")
    record = client.tag(kind="reviewed-pr", key=pr, data={"url": pr, "verdict": "approve"})
    where = {"url": pr, "verdict": {"$in": ["approve", "reject"]}}
    assert [r.id for r in client.list(where=where)] == [record.id]
    assert [r.id for r in client.list(kind="reviewed-pr", where='{"url": "' + pr + '"}')] == [
        record.id
    ]
    with pytest.raises(ClientError) as err:
        list(client.list(where={"url": {"$regex": "x"}}))
    assert err.value.status == 400 and err.value.code == "invalid_query"
    assert err.value.details["part"] == "url.$regex"
