"""Content over HTTP: multipart upload streamed to storage, download streamed, headers, ranges, 304."""

from __future__ import annotations

import hashlib
import io
import os

import orjson
import pytest
from asgiref.sync import sync_to_async

from artifacts_app import services
from artifacts_app.rest.content import STREAM_CHUNK, blob_chunks
from tests.rest.conftest import World, bearer, body


def _upload(
    client, key: str, payload: bytes, *, name: str = "blob.bin", record: dict | None = None
):
    handle = io.BytesIO(payload)
    handle.name = name
    return client.post(
        "/reviewer/v1/artifacts",
        data={
            "record": orjson.dumps(
                record or {"kind": "report", "key": key, "data": {"k": key}}
            ).decode(),
            "contents": handle,
        },
        **bearer(KEY[0]),
    )


KEY: list[str] = []


@pytest.fixture
def key(world: World):
    KEY[:] = [world.agent_key]
    return world.agent_key


def test_multipart_5mib_round_trips_by_sha256(world: World, client, key):
    payload = os.urandom(5 * 1024 * 1024 + 17)
    made = _upload(client, "big", payload)
    assert made.status_code == 201, made.content
    record = orjson.loads(made.content)
    digest = hashlib.sha256(payload).hexdigest()
    assert record["content"] == {
        "size": len(payload),
        "contentType": "application/octet-stream",
        "sha256": digest,
    }
    got = client.get(f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(key))
    assert got.status_code == 200
    assert got.streaming  # never a whole-blob HttpResponse
    data = body(got)
    assert hashlib.sha256(data).hexdigest() == digest
    assert got["Content-Length"] == str(len(payload))
    assert got["ETag"] == f'"{digest}"'
    # Re-tag the same key with new bytes: 200, replaced.
    again = _upload(client, "big", b"small now")
    assert again.status_code == 200
    assert orjson.loads(again.content)["content"]["size"] == 9


def test_multipart_part_content_type_is_used_when_record_gives_none(world, client, key):
    made = _upload(client, "md", b"# hi", name="notes.md")
    assert orjson.loads(made.content)["content"]["contentType"].startswith("text/markdown")
    typed = _upload(
        client,
        "typed",
        b"%PDF-",
        name="x.md",
        record={"kind": "report", "key": "typed", "data": {}, "contentType": "application/pdf"},
    )
    assert orjson.loads(typed.content)["content"]["contentType"] == "application/pdf"


@pytest.mark.parametrize(
    ("content_type", "disposition"),
    [
        ("text/plain; charset=utf-8", "inline"),
        ("image/png", "inline"),
        ("application/pdf", "inline"),
        ("application/json", "inline"),
        ("text/html", "attachment"),
        ("image/svg+xml", "attachment"),
        ("text/markdown", "attachment"),
        ("application/octet-stream", "attachment"),
        ("TEXT/HTML; charset=utf-8", "attachment"),
    ],
)
def test_headers_and_disposition(world: World, client, content_type, disposition):
    record = services.artifact_tag(
        agent=world.agent,
        kind="report",
        key="c",
        data={},
        contents=b"<svg onload=alert(1)>",
        content_type=content_type,
    ).record
    got = client.get(f"/reviewer/v1/artifacts/{record.id}/content", **bearer(world.agent_key))
    assert got.status_code == 200
    assert got["Content-Type"] == content_type.lower()  # stored as parsed (media.py)
    assert got["Content-Disposition"] == f'{disposition}; filename="c{media_ext(content_type)}"'
    assert got["X-Content-Type-Options"] == "nosniff"
    assert got["Content-Security-Policy"] == "sandbox"
    assert got["ETag"] == f'"{record.content.sha256}"'
    assert got["Content-Length"] == "21"
    assert body(got) == b"<svg onload=alert(1)>"


def media_ext(content_type: str) -> str:
    return {
        "text/plain": ".txt",
        "image/png": ".png",
        "application/pdf": ".pdf",
        "application/json": ".json",
        "text/html": ".html",
        "image/svg+xml": ".svg",
        "text/markdown": ".md",
    }.get(content_type.split(";")[0].lower(), ".bin")


@pytest.fixture
def ten(world: World):
    return services.artifact_tag(
        agent=world.agent, kind="report", key="ten", data={}, contents=b"0123456789"
    ).record


@pytest.mark.parametrize(
    ("header", "status", "expected", "content_range"),
    [
        ("bytes=0-3", 206, b"0123", "bytes 0-3/10"),
        ("bytes=7-", 206, b"789", "bytes 7-9/10"),
        ("bytes=-4", 206, b"6789", "bytes 6-9/10"),
        ("bytes=-40", 206, b"0123456789", "bytes 0-9/10"),
        ("bytes=8-99", 206, b"89", "bytes 8-9/10"),
        ("bytes=9-9", 206, b"9", "bytes 9-9/10"),
        ("bytes=0-1,4-5", 200, b"0123456789", None),  # multi-range: the whole, as RFC 9110 allows
        ("items=0-1", 200, b"0123456789", None),
        ("bytes=5-2", 200, b"0123456789", None),
    ],
)
def test_ranges(world: World, client, ten, header, status, expected, content_range):
    got = client.get(
        f"/reviewer/v1/artifacts/{ten.id}/content", HTTP_RANGE=header, **bearer(world.agent_key)
    )
    assert got.status_code == status
    assert body(got) == expected
    assert got["Content-Length"] == str(len(expected))
    assert got.get("Content-Range") == content_range


@pytest.mark.parametrize("header", ["bytes=10-", "bytes=10-20", "bytes=-0", "bytes=99-100"])
def test_range_beyond_end_is_416(world: World, client, ten, header):
    got = client.get(
        f"/reviewer/v1/artifacts/{ten.id}/content", HTTP_RANGE=header, **bearer(world.agent_key)
    )
    assert got.status_code == 416
    assert got["Content-Range"] == "bytes */10"
    assert orjson.loads(got.content)["error"]["code"] == "range_not_satisfiable"


def test_if_none_match_is_304_and_if_range_stale_sends_all(world: World, client, ten):
    url = f"/reviewer/v1/artifacts/{ten.id}/content"
    etag = f'"{ten.content.sha256}"'
    for header in (etag, f"W/{etag}", f'"nope", {etag}', "*"):
        got = client.get(url, HTTP_IF_NONE_MATCH=header, **bearer(world.agent_key))
        assert got.status_code == 304
        assert got["ETag"] == etag
        assert got.content == b""
        assert "Content-Type" not in got
    assert (
        client.get(url, HTTP_IF_NONE_MATCH='"other"', **bearer(world.agent_key)).status_code == 200
    )
    stale = client.get(
        url, HTTP_RANGE="bytes=0-1", HTTP_IF_RANGE='"old"', **bearer(world.agent_key)
    )
    assert stale.status_code == 200 and body(stale) == b"0123456789"
    fresh = client.get(url, HTTP_RANGE="bytes=0-1", HTTP_IF_RANGE=etag, **bearer(world.agent_key))
    assert fresh.status_code == 206 and body(fresh) == b"01"


def test_record_without_content_is_404(world: World, client):
    got = client.get(
        f"/reviewer/v1/artifacts/{world.loose_ids[0]}/content", **bearer(world.agent_key)
    )
    assert got.status_code == 404
    assert orjson.loads(got.content)["error"]["code"] == "no_content"


def test_empty_content(world: World, client):
    record = services.artifact_tag(agent=world.agent, kind="report", data={}, contents=b"").record
    got = client.get(f"/reviewer/v1/artifacts/{record.id}/content", **bearer(world.agent_key))
    assert got.status_code == 200 and body(got) == b"" and got["Content-Length"] == "0"


async def test_blob_chunks_is_an_async_generator_of_bounded_chunks(
    transactional_db, settings, tmp_path
):
    from artifacts_app.blobs import blob_open, blob_put

    payload = os.urandom(STREAM_CHUNK * 2 + 5)
    # blob_put claims the blob's row (artifacts_app/services/blobs.py): database work, so off the loop.
    stored = await sync_to_async(blob_put)(payload)
    sizes = []
    collected = bytearray()
    fh = await sync_to_async(blob_open)(stored.sha256)
    async for chunk in blob_chunks(fh, 0, len(payload) - 1):
        sizes.append(len(chunk))
        collected += chunk
    assert bytes(collected) == payload
    assert max(sizes) <= STREAM_CHUNK and len(sizes) == 3


def test_head_answers_the_headers_without_the_bytes(world: World, client, ten):
    got = client.head(f"/reviewer/v1/artifacts/{ten.id}/content", **bearer(world.agent_key))
    assert got.status_code == 200
    assert got["Content-Length"] == "10" and got["ETag"] == f'"{ten.content.sha256}"'


def _put(client, artifact_id: str, payload: bytes, content_type: str | None, key: str, **extra):
    headers = dict(bearer(key), **extra)
    if content_type is None:  # the test client would send application/octet-stream
        content_type = ""
    return client.generic(
        "PUT",
        f"/reviewer/v1/artifacts/{artifact_id}/content",
        data=payload,
        content_type=content_type,
        **headers,
    )


def test_put_content_replaces_only_the_content_and_emits_tagged(world: World, client, key):
    from artifacts_app.models import Event

    before = orjson.loads(
        client.get(f"/reviewer/v1/artifacts/{world.content_id}", **bearer(key)).content
    )
    last_seq = max(Event.objects.values_list("seq", flat=True))
    response = _put(client, world.content_id, b"# new body", "text/markdown; charset=utf-8", key)
    assert response.status_code == 200, response.content
    after = orjson.loads(response.content)
    assert after["content"] == {
        "size": 10,
        "contentType": "text/markdown; charset=utf-8",
        "sha256": hashlib.sha256(b"# new body").hexdigest(),
    }
    unchanged = ("id", "kind", "key", "title", "data", "sessionId", "turnId", "source", "createdAt")
    assert {f: after[f] for f in unchanged} == {f: before[f] for f in unchanged}
    assert after["updatedAt"] > before["updatedAt"]
    event = Event.objects.get(seq=last_seq + 1, agent=world.agent)
    assert (event.type, event.artifact_id) == ("artifact.tagged", world.content_id)
    from artifacts_app.blobs import blob_read

    assert blob_read(after["content"]["sha256"]) == b"# new body"


def test_put_content_of_an_unkeyed_record_keeps_its_id(world: World, client, key):
    record = services.artifact_tag(
        agent=world.agent, kind="report", data="r", contents=b"old"
    ).record
    response = _put(client, record.id, b"\x00\x01 new", "application/octet-stream", key)
    assert response.status_code == 200, response.content
    assert orjson.loads(response.content)["id"] == record.id
    assert orjson.loads(response.content)["content"]["size"] == 6


@pytest.mark.parametrize(
    ("artifact_id", "content_type", "status", "code"),
    [
        ("art_000000000000000000000000", "text/plain", 404, "unknown_artifact"),
        (None, None, 400, "content_type_required"),
        (None, "text/plain, text/html", 400, "invalid_content_type"),
    ],
)
def test_put_content_refusals_change_nothing(
    world: World, client, key, artifact_id, content_type, status, code
):
    from artifacts_app.models import Blob, Event

    target = artifact_id or world.content_id
    blobs_before, events_before = Blob.objects.count(), Event.objects.count()
    before = client.get(f"/reviewer/v1/artifacts/{world.content_id}", **bearer(key)).content
    response = _put(client, target, b"refused bytes", content_type, key)
    assert response.status_code == status, response.content
    assert orjson.loads(response.content)["error"]["code"] == code
    assert (Blob.objects.count(), Event.objects.count()) == (blobs_before, events_before)
    assert client.get(f"/reviewer/v1/artifacts/{world.content_id}", **bearer(key)).content == before


def test_put_content_past_the_limit_is_413_before_reading(world: World, client, key, settings):
    settings.ARTIFACTS_MAX_CONTENT_BYTES = 8
    declared = _put(client, world.content_id, b"123456789", "text/plain", key)
    assert declared.status_code == 413
    assert orjson.loads(declared.content)["error"] == {
        "code": "content_too_large",
        "message": orjson.loads(declared.content)["error"]["message"],
        "details": {"limit": 8},
    }
    # Without a length (chunked), daphne's door stops it as it arrives: tests/rest/test_uploads.py.
