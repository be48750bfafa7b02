"""The site's door for paths, query strings and the Host header (API.md "Errors").

First in ``MIDDLEWARE``, before anything reads the database: a path or a query value holding NUL
(U+0000) is refused with 400 — PostgreSQL cannot compare text with it and would answer 500, even
to a caller without credentials — and on the API's paths (everything under ``/<slug>/``) a Host
outside ``ALLOWED_HOSTS`` answers the error envelope instead of Django's HTML page. A
``Content-Type`` whose ``charset`` is not a text encoding this server reads
(``media.TEXT_ENCODINGS``) is refused with 400 ``invalid_charset`` before anything decodes with
it: Django takes any name ``codecs.lookup`` knows as the request's encoding, ``idna`` and
``undefined`` included, and the body, form or multipart fields decoded with it answered 500.
Elsewhere (the admin, the playground) the refusals are a plain-text sentence; a wrong Host there
is left to Django, as for any Django site.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

from artifacts_app import media
from artifacts_app.names import RESERVED_SLUGS
from artifacts_app.values import text_problem

# The routes across agents (API.md "Search": ``GET /api/v1/artifacts``) answer as the API does.
ACROSS_PREFIX = "/api/v1/"


def is_api_path(path: str) -> bool:
    """Whether ``path`` is under ``/<slug>/`` (an agent's routes, matched or not) or the routes
    across agents (``/api/v1/``)."""
    if path.startswith(ACROSS_PREFIX):
        return True
    first, slash, _ = path.lstrip("/").partition("/")
    return bool(first and slash) and first not in RESERVED_SLUGS


def envelope_response(status: int, code: str, message: str, details: Any = None) -> HttpResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return HttpResponse(
        orjson.dumps({"error": error}), status=status, content_type="application/json"
    )


def _refusal(api: bool, code: str, message: str, details: Any = None) -> HttpResponse:
    if api:
        return envelope_response(400, code, message, details)
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")


class DoorMiddleware:
    """Refuses what must never reach a view: NUL in the path or the query, a wrong Host on the API."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        api = is_api_path(path)
        if api:
            try:
                request.get_host()
            except DisallowedHost:
                return envelope_response(
                    400,
                    "invalid_host",
                    "The Host header names a host this server does not answer to "
                    "(DJANGO_ALLOWED_HOSTS).",
                )
        problem = text_problem(path)
        if problem:
            return _refusal(api, "invalid_path", f"The path {problem}; remove it.")
        charset = (request.content_params or {}).get("charset")
        if charset is not None and media.text_encoding(charset) is None:
            refusal = media.charset_refusal(charset)
            return _refusal(api, refusal.code, refusal.message, refusal.details)
        for name, values in request.GET.lists():
            problem = text_problem(name) or next((p for p in map(text_problem, values) if p), None)
            if problem:
                shown = name if text_problem(name) is None else repr(name)
                return _refusal(
                    api,
                    "invalid_query",
                    f"Query parameter `{shown}` {problem}; remove it.",
                    {"field": shown},
                )
        return self.get_response(request)
