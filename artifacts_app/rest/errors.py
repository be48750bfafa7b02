"""One exception handler: every 4xx of the REST API in the API.md envelope (DESIGN.md §12).

``ArtifactError`` from the services and access rules, DRF's own exceptions (parse errors, 405,
throttling, failed authentication, CSRF) and Django's (Http404, PermissionDenied, a body past
``DATA_UPLOAD_MAX_MEMORY_SIZE``) all answer ``{"error": {"code", "message", "details"?}}``.
A dependency failure (the database, the storage: ``faults``) answers 503 or 507 in the same
envelope. Anything else is a bug and stays a 500.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from django.core.exceptions import (
    PermissionDenied as DjangoPermissionDenied,
)
from django.core.exceptions import (
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import Http404, HttpResponse
from rest_framework import exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from artifacts_app import faults
from artifacts_app.errors import ArtifactError, NotFoundError, UnavailableError
from artifacts_app.jsontypes import JSON, JSONObject

log = logging.getLogger(__name__)

# DRF exception class -> our code, when DRF's own code would not tell a client what happened.
_DRF_CODES: dict[type, str] = {
    exceptions.ParseError: "malformed_body",
    exceptions.AuthenticationFailed: "invalid_token",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
    exceptions.ValidationError: "invalid",
}


def envelope(code: str, message: str, details: JSON = None) -> JSONObject:
    error: JSONObject = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}


def error_response(
    status: int, body: JSONObject, headers: dict[str, str] | None = None
) -> HttpResponse:
    response = HttpResponse(orjson.dumps(body), status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _sentence(text: object) -> str:
    text = str(text).strip()
    return text if text.endswith((".", "?", "!")) else text + "."


def _drf_envelope(exc: exceptions.APIException, request: Any) -> tuple[int, JSONObject]:
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), None)
    detail = exc.detail
    if isinstance(exc, exceptions.ValidationError):
        return exc.status_code, envelope(
            "invalid", "The request is not valid; see details.", exc.get_full_details()
        )
    if isinstance(exc, exceptions.MethodNotAllowed):
        return exc.status_code, envelope(
            "method_not_allowed", f"{request.method} is not allowed on this route; see Allow."
        )
    if isinstance(exc, exceptions.ParseError):
        return exc.status_code, envelope(
            "malformed_body", f"The request body could not be read: {_sentence(detail)}"
        )
    if isinstance(exc, exceptions.PermissionDenied) and "CSRF" in str(detail):
        return exc.status_code, envelope(
            "csrf_failed",
            "The session cookie needs a CSRF token on this method: send X-CSRFToken, "
            "or use a bearer token instead.",
        )
    if code is None:
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else "error"
    return exc.status_code, envelope(code, _sentence(detail))


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse | None:
    request = context.get("request")
    headers: dict[str, str] = {}
    fault = faults.classify(exc)
    if fault is not None and fault is not exc:
        log.error("%s: %r", fault.code, exc, exc_info=exc)
        exc = fault
    if isinstance(exc, ArtifactError):
        status, body = exc.status, exc.as_envelope()
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="agent-artifacts"'
        if isinstance(exc, UnavailableError):
            headers["Retry-After"] = faults.retry_after(exc)
    elif isinstance(exc, Http404):
        status, body = 404, envelope("not_found", "There is nothing at this address.")
    elif isinstance(exc, DjangoPermissionDenied):
        status, body = 403, envelope("forbidden", "You may not do this.")
    elif isinstance(exc, RequestDataTooBig):
        status, body = (
            413,
            envelope(
                "body_too_large",
                "The request's form fields are larger than the server accepts; "
                "send the blob as the multipart file part `contents`.",
            ),
        )
    elif isinstance(exc, TooManyFieldsSent):
        status, body = 400, envelope("too_many_fields", "The form has too many fields.")
    elif isinstance(exc, TooManyFilesSent):
        status, body = 400, envelope("too_many_fields", "The form has too many files.")
    elif isinstance(exc, exceptions.APIException):
        status, body = _drf_envelope(exc, request)
        auth_header = getattr(exc, "auth_header", None)  # set by DRF on 401s
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
        wait = getattr(exc, "wait", None)  # Throttled
        if wait is not None:
            headers["Retry-After"] = str(int(wait))
    else:
        return None
    return error_response(status, body, headers)


class NotFoundView(APIView):
    """Every path under ``/<slug>/v1/`` no route matched: a 404 envelope, whatever the method."""

    authentication_classes: list = []
    permission_classes: list = []
    schema = None  # not a route

    def get_content_negotiator(self) -> BaseContentNegotiation:
        from artifacts_app.rest.parsers import JSONOnlyNegotiation

        return JSONOnlyNegotiation()

    def _missing(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        raise NotFoundError(
            "unknown_route",
            f"There is no route {request.path!r}; see /api/docs/ for the routes under /<slug>/v1/.",
        )

    get = post = put = patch = delete = head = options = _missing  # type: ignore[assignment]
