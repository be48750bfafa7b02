"""The public doors the app takes instead of other libraries' private names, held to what the app
relies on (the routes that use them are tested through a real daphne in tests/rest)."""

from __future__ import annotations

import io
import pickle

import pytest
from django.core.exceptions import SuspiciousOperation
from django.core.signals import request_finished
from django.db import close_old_connections
from django.http import StreamingHttpResponse
from django.test import RequestFactory

from artifacts_app.rest.content import BlobBody
from artifacts_app.rest.views.base import AgentView, ChunkedBodyRequest


def test_django_closes_a_served_blob_whose_chunks_were_never_read():
    fh = io.BytesIO(b"abc")
    response = StreamingHttpResponse(BlobBody(fh, 0, 2))
    assert response.is_async
    # What the ASGI handler calls once the response is done (or abandoned); without the database
    # clean-up it signals, as Django's test client does.
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)
    assert fh.closed


async def test_a_blob_body_streams_its_range():
    fh = io.BytesIO(b"0123456789")
    fh.seek(2)  # as blob_open hands it over: opened at the range's start
    response = StreamingHttpResponse(BlobBody(fh, 2, 5))
    assert b"".join([chunk async for chunk in response]) == b"2345"


def _chunked(body: bytes) -> object:
    request = RequestFactory().post(
        "/reviewer/v1/sessions", data=body, content_type="application/json"
    )
    del request.META["CONTENT_LENGTH"]
    request.META["HTTP_TRANSFER_ENCODING"] = "chunked"
    return request


def test_a_chunked_json_body_is_read_through_drfs_stream():
    drf_request = AgentView().initialize_request(_chunked(b'{"title": "x"}'))
    assert isinstance(drf_request, ChunkedBodyRequest)
    assert drf_request.data == {"title": "x"}


def test_a_body_with_a_length_takes_drfs_own_request():
    request = RequestFactory().post("/x", data=b'{"a": 1}', content_type="application/json")
    drf_request = AgentView().initialize_request(request)
    assert not isinstance(drf_request, ChunkedBodyRequest)
    assert drf_request.data == {"a": 1}


@pytest.fixture
def s3_storage():
    pytest.importorskip("storages.backends.s3", reason="the S3 storage needs the scale extras")
    from agent_site.s3 import S3Storage

    return S3Storage(
        bucket_name="b",
        location="blobs",
        access_key="k",
        secret_key="s",
        endpoint_url="http://127.0.0.1:9",
        region_name="us-east-1",
    )


def test_an_object_key_is_made_as_django_storages_makes_it(s3_storage):
    assert s3_storage.object_key("ab/cdef") == "blobs/ab/cdef"
    assert s3_storage.object_key("ab/../cd") == "blobs/cd"
    with pytest.raises(SuspiciousOperation):
        s3_storage.object_key("../outside")


def test_the_s3_connections_are_per_thread_and_survive_a_pickle(s3_storage):
    signed, unsigned = s3_storage.connection, s3_storage.unsigned_connection
    assert signed is s3_storage.connection and unsigned is not signed
    import botocore

    assert unsigned.meta.client.meta.config.signature_version is botocore.UNSIGNED
    copy = pickle.loads(pickle.dumps(s3_storage))
    assert copy.object_key("x") == "blobs/x"
    assert copy.connection is not signed
