"""drf-spectacular glue: the bearer scheme, and the error responses every route may answer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from artifacts_app.rest.serializers import ErrorSerializer


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "artifacts_app.rest.auth.BearerAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent key (aak_…) or a user token (aau_…).",
        }


def _err(text: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=text)


ERRORS = {
    400: _err("Bad input: the body, a field or a query parameter (see `error.code`)."),
    401: _err("No credentials, or a token that is unknown or revoked."),
    403: _err("Credentials that may not do this (another agent's key, a user tagging, CSRF)."),
    404: _err("Unknown agent, or a record or session that does not exist or is hidden."),
    405: _err("Method not allowed on this route."),
    415: _err("Unsupported body media type."),
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    base = {code: ERRORS[code] for code in (400, 401, 403, 404, 405)}
    for code in codes:
        base[code] = ERRORS.get(code) or _err(
            {
                409: "The session id exists already.",
                413: "A size limit was passed (data, body or content); the message says which.",
                416: "The range starts past the end of the content.",
            }[code]
        )
    return base


CURSOR = OpenApiParameter("cursor", str, description="Opaque cursor from a page's `next`.")
LIMIT = OpenApiParameter("limit", int, description="Page size, 1–500 (default 50).")
