"""The tag route's lean road: ``POST /<slug>/v1/artifacts`` with a JSON body and a bearer token,
in one hop to the request's thread (DESIGN.md §11).

Agents tag on every step, so this is the hottest route. Through Django's handler a request costs
three hops between the event loop and its thread (the view, ``response.close``, parking the thread)
and nine middleware; under load each hop waits for the OS to run the other thread, and a tag paid
about as much for that as for its own SQL. ``agent_site.asgi``'s handler sends a request that
``eligible`` accepts here instead: on the request's thread, in one hop, ``respond`` runs the
request signals, the site's middleware that apply to a bearer JSON call (all of ``MIDDLEWARE``
except ``SKIPPED``, so the door and the security headers are the same code) and ``tag``, which is
the DRF view's own steps in the view's order with the same pieces: ``BearerAuthentication``,
``views.request_agent``, ``access.require`` (tag), the ``JSONParser``, ``views.tag_json`` (one body
check, one service) and the one ``exception_handler``. Anything else (cookies, multipart, a spooled
body, other methods and routes) takes Django's road. ``tests/rest/test_lean.py`` holds both roads
to the same answers; the OpenAPI schema is the DRF view's (``artifacts_tag``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse
from django.utils.log import log_response
from django.utils.module_loading import import_string
from rest_framework import exceptions

from artifacts_app import access
from artifacts_app.rest.auth import BearerAuthentication
from artifacts_app.rest.errors import exception_handler
from artifacts_app.rest.parsers import JSONOnlyNegotiation, JSONParser
from artifacts_app.rest.views.artifacts import ArtifactsView, tag_json
from artifacts_app.rest.views.base import request_agent

TAG_PATH = re.compile(r"^/(?P<slug>[^/]+)/v1/artifacts$")

# Middleware that do nothing for a bearer-token JSON call to the API: static files (whitenoise),
# the session cookie and what hangs on it (sessions, CSRF — DRF enforces it for session callers
# only —, the lazy request.user, messages). A request carrying a cookie takes Django's road.
SKIPPED = frozenset(
    {
        "whitenoise.middleware.WhiteNoiseMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    }
)


def _allow() -> str:
    # DRF's finalize_response puts the view's methods on every answer of the route (Django's
    # View.setup adds HEAD where there is GET).
    view = ArtifactsView()
    view.setup(HttpRequest())
    return ", ".join(view.allowed_methods)


ALLOW = _allow()
_BEARER = BearerAuthentication()
_PARSER = JSONParser()
_NEGOTIATION = JSONOnlyNegotiation()


def eligible(scope: dict[str, Any]) -> str | None:
    """The slug, if this request takes the lean road; else None. Headers only (the body is
    looked at by the handler: a spooled one takes Django's road)."""
    if scope.get("method") != "POST":
        return None
    match = TAG_PATH.match(scope.get("path", ""))
    if match is None:
        return None
    bearer = json = length = False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            # A body without a length (chunked) is streamed: leave those to Django's road.
            length = True
        elif name == b"authorization":
            bearer = value[:7].lower() == b"bearer "
        elif name == b"content-type":
            # The negotiation's own rule picks the parser (JSON only here).
            chosen = _NEGOTIATION.select_parser(
                SimpleNamespace(content_type=value.decode("latin-1")), [_PARSER]
            )
            json = chosen is _PARSER
        elif name == b"cookie":
            return None
    return match["slug"] if bearer and json and length else None


def tag(request: HttpRequest, slug: str) -> HttpResponse:
    """``ArtifactsView.post`` for a JSON body and a bearer token, without DRF's request wrapper."""
    try:
        authenticated = _BEARER.authenticate(request)
        if authenticated is None:
            raise exceptions.NotAuthenticated()
        caller = authenticated[1]
        request.auth = caller  # type: ignore[attr-defined]  # as DRF's request does (the access line)
        agent = request_agent(caller, slug)
        access.require(caller, agent, access.Action.TAG)  # refuse before reading the body
        response = tag_json(agent, _PARSER.parse(request, None, {"request": request}))
    except Exception as exc:
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            setattr(exc, "auth_header", _BEARER.authenticate_header(request))  # noqa: B010 (as DRF)
        handled = exception_handler(exc, {"request": request})
        if handled is None:
            raise
        response = handled
    response["Allow"] = ALLOW
    return response


def chain(slug_view: Callable[[HttpRequest, str], HttpResponse]) -> Callable[..., Any]:
    """The site's middleware (less ``SKIPPED``) around ``slug_view``, in sync mode, as Django's
    handler builds its chain; the slug travels on the request."""

    def view(request: HttpRequest) -> HttpResponse:
        return slug_view(request, request.lean_slug)  # type: ignore[attr-defined]

    handler: Callable[..., Any] = convert_exception_to_response(view)
    for path in reversed(settings.MIDDLEWARE):
        if path in SKIPPED:
            continue
        try:
            instance = import_string(path)(handler)
        except MiddlewareNotUsed:
            continue
        handler = convert_exception_to_response(instance)
    return handler


def respond(handler: Callable[..., Any], request: HttpRequest, slug: str) -> HttpResponse:
    request.lean_slug = slug  # type: ignore[attr-defined]
    response: HttpResponse = handler(request)
    if response.status_code >= 400:
        log_response(
            "%s: %s", response.reason_phrase, request.path, response=response, request=request
        )
    return response
