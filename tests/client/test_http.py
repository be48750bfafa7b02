"""ArtifactsClient and AsyncArtifactsClient against a live daphne process."""

from __future__ import annotations

import hashlib
import io
import os
import uuid

import pytest

from artifacts_app.client import ArtifactsClient, AsyncArtifactsClient, ClientError
from tests.client.conftest import DroppingProxy, Served


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
