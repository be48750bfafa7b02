"""Resumable uploads (tus 1.0.0, ``/<slug>/v1/uploads``) and the tag's other contents — a finished
upload, known contents — through the site's views (API.md "Large contents"). Real clients over a
real daphne (tuspy, tus-js-client, a dropped connection, a killed server) are in
``test_tus_served.py``."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from django.core.files.storage import FileSystemStorage
from django.core.management import call_command
from django.utils import timezone

from artifacts_app import blobs, services
from artifacts_app.models import Upload
from tests.rest.conftest import bearer, body

URL = "/reviewer/v1/uploads"
TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}
OCTETS = "application/offset+octet-stream"


@pytest.fixture
def key(reviewer) -> str:
    return services.agent_key_create(agent=reviewer)[1]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def create(client, key, length: int, metadata: str | None = None, **extra):
    headers = {**TUS, **bearer(key), "HTTP_UPLOAD_LENGTH": str(length), **extra}
    if metadata is not None:
        headers["HTTP_UPLOAD_METADATA"] = metadata
    return client.post(URL, b"", content_type=OCTETS, **headers)


def made(client, key, length: int, metadata: str | None = None) -> str:
    response = create(client, key, length, metadata)
    assert response.status_code == 201, response.content
    return response["Location"].rsplit("/", 1)[1]


def patch(client, key, upload: str, offset: int, body: bytes, **extra):
    return client.patch(
        f"{URL}/{upload}",
        body,
        content_type=OCTETS,
        **TUS,
        **bearer(key),
        HTTP_UPLOAD_OFFSET=str(offset),
        **extra,
    )


def head(client, key, upload: str):
    return client.head(f"{URL}/{upload}", **TUS, **bearer(key))


def code(response) -> str:
    return orjson.loads(response.content)["error"]["code"]


def tag(client, token, **fields):
    return client.post(
        "/reviewer/v1/artifacts",
        orjson.dumps({"kind": "report", "data": {"x": 1}, **fields}),
        "application/json",
        **bearer(token),
    )


def test_options_says_what_the_server_speaks(client, key):
    response = client.options(URL, **bearer(key))
    assert response.status_code == 204
    assert response["Tus-Resumable"] == response["Tus-Version"] == "1.0.0"
    assert set(response["Tus-Extension"].split(",")) == {
        "creation",
        "creation-with-upload",
        "termination",
        "checksum",
        "expiration",
    }
    assert int(response["Tus-Max-Size"]) == 10 * 1024**3
    assert set(response["Tus-Checksum-Algorithm"].split(",")) == {"sha256", "sha1"}


def test_an_upload_in_pieces_becomes_a_tags_contents(client, key):
    data = bytes(range(256)) * 1000
    upload = made(client, key, len(data), f"contentType {b64('text/csv')},filename {b64('a.csv')}")
    state = head(client, key, upload)
    assert state.status_code == 200
    assert state["Upload-Offset"] == "0" and state["Upload-Length"] == str(len(data))
    assert state["Cache-Control"] == "no-store" and "Upload-Expires" in state
    assert "contentType " in state["Upload-Metadata"]
    first = patch(client, key, upload, 0, data[:100_000])
    assert first.status_code == 204 and first["Upload-Offset"] == "100000"
    assert tag(client, key, upload=upload).status_code == 400  # not whole yet
    assert code(tag(client, key, upload=upload)) == "upload_incomplete"
    last = patch(client, key, upload, 100_000, data[100_000:])
    assert last.status_code == 204 and last["Upload-Offset"] == str(len(data))
    tagged = tag(client, key, upload=upload)
    assert tagged.status_code == 201, tagged.content
    record = orjson.loads(tagged.content)
    assert record["content"] == {
        "size": len(data),
        "contentType": "text/csv",
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    served = client.get(f"/reviewer/v1/artifacts/{record['id']}/content", **bearer(key))
    assert body(served) == data
    # Used once: a second tag of it finds nothing, and the upload is gone for HEAD too.
    again = tag(client, key, upload=upload)
    assert again.status_code == 404 and code(again) == "unknown_upload"
    assert head(client, key, upload).status_code == 404


def test_creation_with_upload_and_method_override(client, key):
    data = b"hello, resumable world"
    response = client.post(
        URL,
        data,
        content_type=OCTETS,
        **TUS,
        **bearer(key),
        HTTP_UPLOAD_LENGTH=str(len(data) * 2),
    )
    assert response.status_code == 201 and response["Upload-Offset"] == str(len(data))
    upload = response["Location"].rsplit("/", 1)[1]
    # A client that can send only GET and POST names the method in X-HTTP-Method-Override.
    overridden = client.post(
        f"{URL}/{upload}",
        data,
        content_type=OCTETS,
        **TUS,
        **bearer(key),
        HTTP_UPLOAD_OFFSET=str(len(data)),
        HTTP_X_HTTP_METHOD_OVERRIDE="PATCH",
    )
    assert overridden.status_code == 204 and overridden["Upload-Offset"] == str(len(data) * 2)
    record = orjson.loads(tag(client, key, upload=upload).content)
    assert record["content"]["sha256"] == hashlib.sha256(data * 2).hexdigest()
    assert record["content"]["contentType"] == "application/octet-stream"


def test_content_put_takes_an_upload_id(client, key):
    record = orjson.loads(tag(client, key, key="k", contents="old").content)
    upload = made(client, key, 5, f"contentType {b64('text/markdown')}")
    assert patch(client, key, upload, 0, b"# new").status_code == 204
    url = f"/reviewer/v1/artifacts/{record['id']}/content"
    response = client.put(url, b"", content_type="", **bearer(key), HTTP_UPLOAD_ID=upload)
    assert response.status_code == 200, response.content
    content = orjson.loads(response.content)["content"]
    assert content["contentType"] == "text/markdown" and content["size"] == 5
    missing = client.put(url, b"", content_type="", **bearer(key), HTTP_UPLOAD_ID="up_nope")
    assert missing.status_code == 404 and code(missing) == "unknown_upload"


def test_checksums_are_checked_and_a_mismatch_keeps_the_offset(client, key):
    upload = made(client, key, 8)
    good = base64.b64encode(hashlib.sha256(b"abcd").digest()).decode()
    assert (
        patch(client, key, upload, 0, b"abcd", HTTP_UPLOAD_CHECKSUM=f"sha256 {good}").status_code
        == 204
    )
    wrong = base64.b64encode(hashlib.sha1(b"nope").digest()).decode()
    refused = patch(client, key, upload, 4, b"efgh", HTTP_UPLOAD_CHECKSUM=f"sha1 {wrong}")
    assert refused.status_code == 460 and code(refused) == "checksum_mismatch"
    assert head(client, key, upload)["Upload-Offset"] == "4"
    unknown = patch(client, key, upload, 4, b"efgh", HTTP_UPLOAD_CHECKSUM=f"md5 {wrong}")
    assert unknown.status_code == 400 and code(unknown) == "unsupported_checksum"
    sha1 = base64.b64encode(hashlib.sha1(b"efgh").digest()).decode()
    assert (
        patch(client, key, upload, 4, b"efgh", HTTP_UPLOAD_CHECKSUM=f"sha1 {sha1}").status_code
        == 204
    )
    record = orjson.loads(tag(client, key, upload=upload).content)
    assert record["content"]["sha256"] == hashlib.sha256(b"abcdefgh").hexdigest()


@pytest.mark.parametrize(
    ("headers", "status", "expected"),
    [
        ({}, 400, "upload_length_required"),
        ({"HTTP_UPLOAD_LENGTH": "-1"}, 400, "invalid_upload_length"),
        ({"HTTP_UPLOAD_LENGTH": "12abc"}, 400, "invalid_upload_length"),
        ({"HTTP_UPLOAD_LENGTH": "9" * 30}, 400, "invalid_upload_length"),
        ({"HTTP_UPLOAD_LENGTH": str(10 * 1024**3 + 1)}, 413, "upload_too_large"),
        (
            {"HTTP_UPLOAD_LENGTH": "5", "HTTP_UPLOAD_METADATA": "name %%%"},
            400,
            "invalid_upload_metadata",
        ),
        (
            {"HTTP_UPLOAD_LENGTH": "5", "HTTP_UPLOAD_METADATA": f"a {b64('x')},a {b64('y')}"},
            400,
            "invalid_upload_metadata",
        ),
        (
            {"HTTP_UPLOAD_LENGTH": "5", "HTTP_UPLOAD_METADATA": "a b c"},
            400,
            "invalid_upload_metadata",
        ),
        (
            {"HTTP_UPLOAD_LENGTH": "5", "HTTP_UPLOAD_METADATA": f"a {b64('x' + chr(0))}"},
            400,
            "invalid_upload_metadata",
        ),
        (
            {"HTTP_UPLOAD_LENGTH": "5", "HTTP_UPLOAD_METADATA": f"contentType {b64('a, b')}"},
            400,
            "invalid_content_type",
        ),
        ({"HTTP_UPLOAD_LENGTH": "5", "HTTP_TUS_RESUMABLE": "0.2.2"}, 412, "tus_version"),
    ],
)
def test_bad_creations_are_refused_and_make_nothing(client, key, headers, status, expected):
    response = client.post(URL, b"", content_type=OCTETS, **{**TUS, **bearer(key), **headers})
    assert response.status_code == status, response.content
    assert code(response) == expected
    assert response["Tus-Resumable"] == "1.0.0"
    if status == 412:
        assert response["Tus-Version"] == "1.0.0"
    assert not Upload.objects.exists()


def test_bad_patches_are_refused_and_keep_the_offset(client, key):
    upload = made(client, key, 10)
    assert patch(client, key, upload, 0, b"12345").status_code == 204
    at_wrong = patch(client, key, upload, 3, b"xx")
    assert at_wrong.status_code == 409 and code(at_wrong) == "offset_mismatch"
    past = patch(client, key, upload, 5, b"123456")
    assert past.status_code == 413 and code(past) == "upload_past_length"
    typed = client.patch(
        f"{URL}/{upload}",
        b"xx",
        content_type="text/plain",
        **TUS,
        **bearer(key),
        HTTP_UPLOAD_OFFSET="5",
    )
    assert typed.status_code == 415
    no_offset = client.patch(f"{URL}/{upload}", b"xx", content_type=OCTETS, **TUS, **bearer(key))
    assert no_offset.status_code == 400 and code(no_offset) == "invalid_upload_offset"
    assert head(client, key, upload)["Upload-Offset"] == "5"


def test_a_patch_while_another_writes_is_locked_out(client, key):
    upload = made(client, key, 10)
    # Another PATCH holds the upload (this live process's lease).
    Upload.objects.filter(pk=upload).update(
        lease="elsewhere-host:1:ab", lease_until=timezone.now() + timedelta(minutes=5)
    )
    locked = patch(client, key, upload, 0, b"12345")
    assert locked.status_code == 423 and code(locked) == "upload_locked"
    # A lease whose time is over is taken over.
    Upload.objects.filter(pk=upload).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert patch(client, key, upload, 0, b"12345").status_code == 204


def test_termination_removes_the_upload_and_its_bytes(client, key):
    upload = made(client, key, 10)
    assert patch(client, key, upload, 0, b"12345").status_code == 204
    store = blobs.blob_storage()
    response = client.delete(f"{URL}/{upload}", **TUS, **bearer(key))
    assert response.status_code == 204
    assert head(client, key, upload).status_code == 404
    assert not Upload.objects.exists()
    if isinstance(store, FileSystemStorage):
        assert not (Path(store.location) / ".uploads" / upload).exists()
    else:  # S3: the multipart upload is aborted
        client = store.connection.meta.client
        listed = client.list_multipart_uploads(Bucket=store.bucket_name).get("Uploads", [])
        assert not [u for u in listed if u["Key"].endswith(upload)]


def test_expired_uploads_answer_410_and_gc_blobs_removes_them(client, key):
    upload = made(client, key, 10)
    assert patch(client, key, upload, 0, b"12345").status_code == 204
    Upload.objects.filter(pk=upload).update(expires_at=timezone.now() - timedelta(seconds=1))
    gone = head(client, key, upload)
    assert gone.status_code == 410
    assert code(patch(client, key, upload, 5, b"67890")) == "upload_expired"
    call_command("gc_blobs", "--grace", "1h")
    assert head(client, key, upload).status_code == 404
    assert not Upload.objects.exists()


def test_a_finished_unused_upload_keeps_its_blob_through_gc(client, key):
    upload = made(client, key, 4)
    assert patch(client, key, upload, 0, b"keep").status_code == 204
    sha = hashlib.sha256(b"keep").hexdigest()
    from artifacts_app.models import Blob

    Blob.objects.filter(pk=sha).update(created_at=timezone.now() - timedelta(days=1))
    call_command("gc_blobs", "--grace", "1h")
    assert blobs.blob_exists(sha)
    assert tag(client, key, upload=upload).status_code == 201


def test_uploads_are_hidden_from_everyone_but_the_agents_key(
    client, key, freeform, django_user_model
):
    upload = made(client, key, 10)
    other = services.agent_key_create(agent=freeform)[1]
    staff = django_user_model.objects.create_user("sup", password="x", is_staff=True)
    staff_token = services.user_token_create(user=staff)[1]
    user = django_user_model.objects.create_user("ann", password="x")
    user_token = services.user_token_create(user=user)[1]
    for token in (other, staff_token, user_token):
        assert head(client, token, upload).status_code == 404
        assert create(client, token, 5).status_code == 404
        assert patch(client, token, upload, 0, b"12345").status_code == 404
    # The other agent's own uploads route does not know it either.
    response = client.head(f"/free/v1/uploads/{upload}", **TUS, **bearer(other))
    assert response.status_code == 404
    assert client.head(f"{URL}/{upload}", **TUS).status_code == 401
    assert head(client, key, upload)["Upload-Offset"] == "0"


def test_known_contents_attach_a_blob_the_agent_stores(client, key, freeform):
    data = b"known bytes " * 100
    first = orjson.loads(
        tag(client, key, key="a", contentsBase64=base64.b64encode(data).decode()).content
    )
    sha = first["content"]["sha256"]
    known = tag(
        client, key, key="b", contentsSha256=sha, contentsSize=len(data), contentType="text/plain"
    )
    assert known.status_code == 201, known.content
    assert orjson.loads(known.content)["content"] == {
        "size": len(data),
        "contentType": "text/plain",
        "sha256": sha,
    }
    wrong_size = tag(client, key, key="c", contentsSha256=sha, contentsSize=len(data) + 1)
    assert wrong_size.status_code == 409 and code(wrong_size) == "contents_unknown"
    # Another agent never finds this agent's blob.
    other = services.agent_key_create(agent=freeform)[1]
    theirs = client.post(
        "/free/v1/artifacts",
        orjson.dumps({"data": {}, "contentsSha256": sha, "contentsSize": len(data)}),
        "application/json",
        **bearer(other),
    )
    assert theirs.status_code == 409 and code(theirs) == "contents_unknown"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"contentsSha256": "A" * 64, "contentsSize": 1}, "invalid_contents_sha256"),
        ({"contentsSha256": "a" * 64}, "known_contents_incomplete"),
        ({"contentsSize": 3}, "known_contents_incomplete"),
        ({"contentsSha256": "a" * 64, "contentsSize": -1}, "invalid_contents_size"),
        ({"contentsSha256": "a" * 64, "contentsSize": True}, "invalid_contents_size"),
        ({"upload": "nope"}, "invalid_upload"),
        ({"upload": "up_abc", "contents": "x"}, "contents_conflict"),
        ({"upload": "up_abc", "contentsSha256": "a" * 64, "contentsSize": 1}, "contents_conflict"),
    ],
)
def test_bad_contents_sources_are_refused(client, key, fields, expected):
    response = tag(client, key, **fields)
    assert response.status_code == 400, response.content
    assert code(response) == expected


def test_an_empty_upload_is_finished_when_made(client, key):
    upload = made(client, key, 0)
    assert head(client, key, upload)["Upload-Offset"] == "0"
    record = orjson.loads(tag(client, key, upload=upload).content)
    assert record["content"]["size"] == 0
    assert record["content"]["sha256"] == hashlib.sha256(b"").hexdigest()


def test_an_uploaded_text_content_is_found_by_its_words(client, key):
    """Search reads the words of a text content that came by upload — in a tag or a content
    PUT — as it reads those of contents sent inline: found as soon as the tag answers."""

    def found(q):
        listed = client.get(f"/reviewer/v1/artifacts?q={q}", **bearer(key))
        assert listed.status_code == 200, listed.content
        return [record["key"] for record in orjson.loads(listed.content)["results"]]

    text = b"# zanzibar quarterly"
    upload = made(client, key, len(text), f"contentType {b64('text/markdown')}")
    assert patch(client, key, upload, 0, text).status_code == 204
    assert tag(client, key, key="by-upload", upload=upload).status_code == 201
    assert found("zanzibar") == ["by-upload"]
    record = orjson.loads(tag(client, key, key="replaced", contents="old words").content)
    text = b"marmalade nimbus!"
    upload = made(client, key, len(text), f"contentType {b64('text/plain')}")
    assert patch(client, key, upload, 0, text).status_code == 204
    url = f"/reviewer/v1/artifacts/{record['id']}/content"
    put = client.put(url, b"", content_type="", **bearer(key), HTTP_UPLOAD_ID=upload)
    assert put.status_code == 200, put.content
    assert found("marmalade") == ["replaced"]
    assert found("old") == []
