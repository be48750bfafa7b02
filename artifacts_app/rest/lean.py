"""The tag route, ``POST /<slug>/v1/artifacts``: one decision before URL resolution, one function
for every caller and body (DESIGN.md §11, §14).

Agents tag on every step, so this is the hottest route. ``route`` is the one place that says a
request is the tag. Two things ask it:

- ``TagRouteMiddleware``, the last entry of ``MIDDLEWARE`` (the system check ``artifacts.E105``
  keeps it there). Under every handler (daphne's, the test client's) the site's whole chain runs
  for a tag — the door, the faults, the security headers, static files, sessions, CSRF, auth,
  messages, and whatever middleware is added before it later — and at its end this answers with
  ``tag`` (``request.resolver_match`` set as the URLs would have: ``rest:artifacts``, the slug)
  instead of resolving the URL and entering DRF's view (DRF's view entry was measured at
  ~120 µs of a ~750 µs tag, URL resolving at ~21 µs: docs/benchmarks.md). No middleware is
  skipped: those that serve cookie callers cost a bearer call a few µs (a cookie looked up and not
  found, a lazy ``request.user`` never read, messages kept in the session, never loaded).
- ``agent_site.asgi``'s handler, which answers the route in one hop to the request's thread
  (signals, the chain, ``response.close``) instead of three.

``tag`` is the route's only implementation, with DRF's pieces in DRF's order: the site's two
authenticators (``BearerAuthentication``, then DRF's ``SessionAuthentication``, whose CSRF check
refuses a cookie without the token), ``views.request_agent``, ``access.require`` (tag) before the
body is read, the body by DRF's negotiation and parsers on DRF's request (JSON; multipart, its file
part streamed to storage by ``LimitedUploadHandler``; a chunked or streamed body read as it
arrives), ``views.tag_json`` / ``views.tag_multipart`` (one service), the one
``exception_handler``, and ``Allow`` as DRF puts it on every answer of the route. A JSON body with
a length is parsed straight off Django's request, as DRF's request would, without making one.
``ArtifactsView.post`` only declares the operation to the OpenAPI schema (``artifacts_tag``) and
to ``Allow``; the list (GET) and every other method on the path are DRF's view.
``tests/rest/test_lean.py`` sends each request through both handlers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import ResolverMatch, resolve
from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request

from artifacts_app import access
from artifacts_app.names import RESERVED_SLUGS
from artifacts_app.rest.auth import BearerAuthentication, request_caller
from artifacts_app.rest.errors import exception_handler
from artifacts_app.rest.parsers import (
    JSONOnlyNegotiation,
    JSONParser,
    LimitedUploadHandler,
    MultiPartParser,
)
from artifacts_app.rest.views.artifacts import ArtifactsView, tag_json, tag_multipart
from artifacts_app.rest.views.base import ChunkedBodyRequest, chunked_body, request_agent

TAG_PATH = re.compile(r"^/(?P<slug>[^/]+)/v1/artifacts$")


def route(method: str | None, path: str) -> str | None:
    """The slug, if this request is the tag; else None. ``path`` is the path below the script
    prefix. A reserved slug (``/admin/…``) is the site's own prefix: left to the URLs."""
    if method != "POST":
        return None
    match = TAG_PATH.match(path)
    if match is None or match["slug"] in RESERVED_SLUGS:
        return None
    return match["slug"]


def _allow() -> str:
    # DRF's finalize_response puts the view's methods on every answer of the route (Django's
    # View.setup adds HEAD where there is GET).
    view = ArtifactsView()
    view.setup(HttpRequest())
    return ", ".join(view.allowed_methods)


ALLOW = _allow()
_BEARER = BearerAuthentication()
_SESSION = SessionAuthentication()
_JSON = JSONParser()
_MULTIPART = MultiPartParser()
_NEGOTIATION = JSONOnlyNegotiation()


def _drf_request(request: HttpRequest, slug: str) -> Request:
    """DRF's request on ``request``, as ``AgentView.initialize_request`` makes it: for the session
    authenticator and for every body but a JSON one with a length."""
    kind = ChunkedBodyRequest if chunked_body(request) else Request
    return kind(
        request,
        parsers=[_JSON, _MULTIPART],
        authenticators=[_BEARER, _SESSION],
        negotiator=_NEGOTIATION,
        parser_context={"view": None, "args": (), "kwargs": {"slug": slug}},
    )


def _caller(request: HttpRequest, slug: str) -> tuple[access.Caller, Request | None]:
    """The caller, as DRF's authenticators in the site's order find it: a bearer credential
    (refused if it does not authenticate), else the session's user (CSRF checked), else anonymous.
    The DRF request is made only for a caller without a bearer credential."""
    bearer = _BEARER.authenticate(request)
    if bearer is not None:
        return bearer[1], None
    drf = _drf_request(request, slug)
    return request_caller(drf), drf


def _json_with_length(request: HttpRequest) -> bool:
    # DRF reads a body with a Content-Length straight from Django's request (nothing has read it
    # before the tag); JSONParser is what its negotiation picks for this Content-Type.
    length = str(request.META.get("CONTENT_LENGTH") or "")
    return (
        length.isdigit()
        and int(length) > 0
        and _NEGOTIATION.select_parser(request, [_JSON]) is _JSON
    )


def tag(request: HttpRequest, slug: str) -> HttpResponse:
    """The tag route's one implementation: every ``POST /<slug>/v1/artifacts``."""
    try:
        caller, drf = _caller(request, slug)
        request.auth = caller  # type: ignore[attr-defined]  # as DRF's request does (the access line)
        agent = request_agent(caller, slug)
        access.require(caller, agent, access.Action.TAG)  # refuse before reading the body
        if drf is None and _json_with_length(request):
            response = tag_json(agent, _JSON.parse(request, None, {"request": request}))
        else:
            drf = drf or _drf_request(request, slug)
            # Where the multipart parser reads them (rest/parsers.py).
            drf.upload_handlers = [LimitedUploadHandler(request)]
            if (drf.content_type or "").lower().startswith("multipart/"):
                # DRF's stubs type ``data`` as a dict or a list; a multipart body's is a QueryDict.
                parts: Any = drf.data
                response = tag_multipart(agent, parts, drf.FILES)
            else:
                response = tag_json(agent, drf.data)
    except Exception as exc:
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            # As DRF's APIView.handle_exception: the first authenticator's challenge.
            setattr(exc, "auth_header", _BEARER.authenticate_header(request))  # noqa: B010 (as DRF)
        handled = exception_handler(exc, {"request": request})
        if handled is None:
            raise
        response = handled
    response["Allow"] = ALLOW
    return response


class TagRouteMiddleware:
    """Last in ``MIDDLEWARE``: the tag route answered by ``tag``, before URL resolution."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        slug = route(request.method, request.path_info)
        if slug is None:
            return self.get_response(request)
        # What URL resolution would have set, for the middleware around (a route's name, the
        # slug): the URLs' own match of the path, with this request's slug.
        named = _url_match()
        apps: list[str | None] = [*named.app_names]
        namespaces: list[str | None] = [*named.namespaces]
        request.resolver_match = ResolverMatch(
            named.func, (), {"slug": slug}, named.url_name, apps, namespaces, named.route
        )
        return tag(request, slug)


@functools.cache
def _url_match() -> ResolverMatch:
    return resolve("/slug/v1/artifacts")
