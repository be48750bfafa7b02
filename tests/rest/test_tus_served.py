"""Resumable uploads over a real daphne with real tus clients (API.md "Large contents"): tuspy
unchanged, a connection dropped mid-PATCH, a server killed with SIGKILL mid-upload, two PATCHes
at once — each resumed from the offset the server reports, the finished contents' sha256 right.

On the scale profile the server's storage is S3 (moto, tests/conftest.py): the same tests then
hold the multipart upload, its parts and its tail to the same rules.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
import time

import httpx
import orjson
import pytest
from tusclient import client as tus_client

from tests.servers import HOST, DaphneServer, sqlite_site, wait_for

MIB = 1024 * 1024
TUS = {"Tus-Resumable": "1.0.0"}


@pytest.fixture(scope="module")
def served(tmp_path_factory, _s3_server):
    # _s3_server first: at scale the server's environment then names moto's S3 as its storage.
    data_dir = tmp_path_factory.mktemp("tus")
    env, key = sqlite_site(data_dir, ARTIFACTS_BODY_IDLE_SECONDS="5")
    server = DaphneServer(env, log_path=data_dir / "daphne.log", ready_path="/reviewer/v1/")
    with server:
        client = httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        )
        yield server, client, key
        client.close()


def payload(size: int, seed: int) -> bytes:
    return hashlib.sha256(str(seed).encode()).digest() * (size // 32) + os.urandom(size % 32)


def tus(server, key) -> tus_client.TusClient:
    return tus_client.TusClient(
        f"{server.base_url}/reviewer/v1/uploads", headers={"Authorization": f"Bearer {key}"}
    )


def offset(client, url: str) -> int:
    response = client.head(url, headers=TUS)
    assert response.status_code == 200, response.text
    return int(response.headers["Upload-Offset"])


def tag_with(client, upload_url: str) -> dict:
    upload = upload_url.rsplit("/", 1)[1]
    response = client.post(
        "/reviewer/v1/artifacts", json={"kind": "report", "data": {"x": 1}, "upload": upload}
    )
    assert response.status_code == 201, response.text
    return orjson.loads(response.content)


def stored(client, record: dict) -> bytes:
    return client.get(f"/reviewer/v1/artifacts/{record['id']}/content").content


def made(client, length: int) -> str:
    response = client.post("/reviewer/v1/uploads", headers={**TUS, "Upload-Length": str(length)})
    assert response.status_code == 201, response.text
    return response.headers["Location"]


def raw_patch(server, key: str, url: str, at: int, length: int, first: bytes) -> socket.socket:
    """A PATCH of ``length`` bytes at ``at`` whose first bytes only are sent now."""
    path = url.split(str(server.port), 1)[1]
    sock = socket.create_connection((HOST, server.port))
    head = (
        f"PATCH {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {key}\r\n"
        f"Tus-Resumable: 1.0.0\r\nUpload-Offset: {at}\r\n"
        f"Content-Type: application/offset+octet-stream\r\nContent-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + first)
    return sock


def free(client, url: str) -> bool:
    """Whether no PATCH holds the upload now: an empty PATCH at its offset is not locked out."""
    at = offset(client, url)
    response = client.patch(
        url,
        content=b"",
        headers={
            **TUS,
            "Upload-Offset": str(at),
            "Content-Type": "application/offset+octet-stream",
        },
    )
    assert response.status_code in (204, 423), response.text
    return response.status_code == 204


def test_tuspy_uploads_in_chunks_with_checksums(served):
    server, client, key = served
    data = payload(5 * MIB + 123, 1)
    uploader = tus(server, key).uploader(
        file_stream=io.BytesIO(data),
        chunk_size=MIB,
        metadata={"contentType": "text/plain", "filename": "notes.txt"},
        upload_checksum=True,
    )
    uploader.upload()
    assert offset(client, uploader.url) == len(data)
    record = tag_with(client, uploader.url)
    assert record["content"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["content"]["contentType"] == "text/plain"
    assert stored(client, record) == data
    if os.environ.get("ARTIFACTS_STORAGE") == "s3":  # the scale profile: in moto's bucket
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=os.environ["ARTIFACTS_S3_ENDPOINT_URL"],
            region_name="us-east-1",
        )
        sha = record["content"]["sha256"]
        listed = s3.list_objects_v2(Bucket=os.environ["ARTIFACTS_S3_BUCKET"])
        assert any(item["Key"].endswith(sha) for item in listed.get("Contents", []))
        bucket = os.environ["ARTIFACTS_S3_BUCKET"]
        pending = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        upload = uploader.url.rsplit("/", 1)[1]
        assert not [item for item in pending if item["Key"].endswith(upload)]  # completed


def test_a_dropped_connection_resumes_from_the_reported_offset(served):
    server, client, key = served
    data = payload(6 * MIB, 2)
    url = made(client, len(data))
    sock = raw_patch(server, key, url, 0, len(data), data[: 3 * MIB])
    time.sleep(1)  # the bytes on their way in (well under the 5 s the server waits for more)
    sock.close()  # mid-body: the client is gone
    wait_for(lambda: offset(client, url) > 0 and free(client, url), "the cut PATCH to end")
    kept = offset(client, url)
    assert 0 < kept <= 3 * MIB
    uploader = tus(server, key).uploader(file_stream=io.BytesIO(data), url=url, chunk_size=2 * MIB)
    assert uploader.offset == kept
    uploader.upload()
    record = tag_with(client, url)
    assert record["content"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert stored(client, record) == data


def test_a_second_patch_while_one_writes_is_locked_out(served):
    server, client, key = served
    data = payload(4 * MIB, 3)
    url = made(client, len(data))
    sock = raw_patch(server, key, url, 0, len(data), data[:MIB])
    try:
        wait_for(lambda: not free(client, url), "the first PATCH to hold the upload")
        sock.sendall(data[MIB:])
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 204"), answer
    finally:
        sock.close()
    assert offset(client, url) == len(data)
    assert tag_with(client, url)["content"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_chunked_patch_past_the_length_is_refused_and_the_upload_goes_on(served):
    """A streamed (chunked) PATCH says no length, so the server counts: past ``Upload-Length`` it
    answers 413 ``upload_past_length``; what it reports as the offset is kept, and the upload is
    finished from there with exactly its bytes."""
    server, client, key = served
    data = payload(3 * MIB, 4)
    url = made(client, len(data))

    def too_long():
        yield data
        yield b"x" * MIB  # a mebibyte more than the upload holds

    past = client.patch(
        url,
        content=too_long(),  # an iterator: httpx sends it chunked
        headers={
            **TUS,
            "Upload-Offset": "0",
            "Content-Type": "application/offset+octet-stream",
        },
    )
    assert past.status_code == 413, past.text
    assert past.json()["error"]["code"] == "upload_past_length"
    wait_for(lambda: free(client, url), "the refused PATCH to end")
    kept = offset(client, url)
    assert kept <= len(data)
    if kept < len(data):
        uploader = tus(server, key).uploader(file_stream=io.BytesIO(data), url=url, chunk_size=MIB)
        assert uploader.offset == kept
        uploader.upload()
    record = tag_with(client, url)
    assert record["content"]["sha256"] == hashlib.sha256(data).hexdigest()


@pytest.mark.slow
def test_a_server_killed_mid_upload_resumes_with_every_byte_kept(served):
    """SIGKILL mid-PATCH: what the server reported stays stored; the client asks the offset of
    the restarted server and sends the rest; the whole is right."""
    server, client, key = served
    data = payload(48 * MIB, 4)
    url = made(client, len(data))
    sock = raw_patch(server, key, url, 0, len(data), data[: 40 * MIB])
    try:
        # Durable bytes are reported every 16 MiB of a PATCH (services.uploads.CHECKPOINT).
        wait_for(lambda: offset(client, url) >= 32 * MIB, "two checkpoints", seconds=120)
        server.kill()
    finally:
        sock.close()
    server.start()
    kept = offset(client, url)
    assert 32 * MIB <= kept <= 40 * MIB
    uploader = tus(server, key).uploader(file_stream=io.BytesIO(data), url=url, chunk_size=8 * MIB)
    assert uploader.offset == kept
    uploader.upload()
    record = tag_with(client, url)
    assert record["content"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert stored(client, record) == data
