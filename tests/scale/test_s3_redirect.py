"""ARTIFACTS_S3_REDIRECT: content answers a 302 to a presigned S3 URL (moto in the scale run)."""

from __future__ import annotations

import httpx
import pytest
from django.test import Client

from artifacts_app import services


@pytest.mark.scale
def test_content_redirects_to_a_presigned_url_with_the_records_headers(db, settings):
    agent = services.agent_create(slug="s3-redirect", max_artifacts=10)
    _, key = services.agent_key_create(agent=agent)
    record = services.artifact_tag(
        agent=agent,
        kind="report",
        data={},
        contents=b"# hello\n" * 100,
        content_type="text/markdown",
    ).record
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    url = f"/s3-redirect/v1/artifacts/{record.id}/content"
    client = Client()

    settings.ARTIFACTS_S3_REDIRECT = False
    streamed = client.get(url, **auth)
    assert streamed.status_code == 200
    assert streamed.streaming and streamed["Content-Length"] == "800"  # streamed by the server

    settings.ARTIFACTS_S3_REDIRECT = True
    response = client.get(url, **auth)
    assert response.status_code == 302
    assert response["ETag"] == f'"{record.content.sha256}"'
    followed = httpx.get(response["Location"])
    assert followed.status_code == 200
    assert followed.content == b"# hello\n" * 100
    assert followed.headers["content-type"] == "text/markdown"
    assert followed.headers["content-disposition"].startswith("attachment; filename=")
    # The 304 check comes first: a client with the current copy is not sent anywhere.
    again = client.get(url, HTTP_IF_NONE_MATCH=response["ETag"], **auth)
    assert again.status_code == 304
    # Access is decided before the redirect: no credentials, no URL.
    assert client.get(url).status_code == 401
