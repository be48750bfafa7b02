"""The one exception handler: DRF's and Django's own exceptions answer the envelope too."""

from __future__ import annotations

import orjson
import pytest
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions
from rest_framework.test import APIRequestFactory

from artifacts_app.errors import TooLargeError
from artifacts_app.rest.errors import exception_handler
from tests.rest.conftest import World, bearer


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (exceptions.Throttled(wait=3), 429, "throttled"),
        (exceptions.ParseError("Multipart form parse error"), 400, "malformed_body"),
        (exceptions.NotAcceptable(), 406, "not_acceptable"),
        (exceptions.UnsupportedMediaType("text/csv"), 415, "unsupported_media_type"),
        (exceptions.ValidationError({"x": ["bad"]}), 400, "invalid"),
        (exceptions.PermissionDenied("CSRF Failed: CSRF token missing."), 403, "csrf_failed"),
        (exceptions.NotFound(), 404, "not_found"),
        (Http404(), 404, "not_found"),
        (PermissionDenied(), 403, "forbidden"),
        (RequestDataTooBig(), 413, "body_too_large"),
        (TooLargeError("data_too_large", "Too big."), 413, "data_too_large"),
    ],
)
def test_every_client_error_is_an_envelope(exc, status, code):
    request = APIRequestFactory().get("/reviewer/v1/artifacts")
    response = exception_handler(exc, {"request": request})
    assert response.status_code == status
    error = orjson.loads(response.content)["error"]
    assert error["code"] == code and error["message"].endswith(".")
    if status == 429:
        assert response["Retry-After"] == "3"


def test_bugs_stay_500():
    assert exception_handler(ValueError("bug"), {"request": None}) is None


def test_malformed_multipart_is_the_envelope(world: World, client):
    response = client.post(
        "/reviewer/v1/artifacts",
        data=b'--x\r\nContent-Disposition: form-data; name="record"\r\n\r\n{}',
        content_type="multipart/form-data; boundary=",
        **bearer(world.agent_key),
    )
    assert 400 <= response.status_code < 500
    assert orjson.loads(response.content)["error"]["code"]
