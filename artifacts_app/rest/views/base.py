"""The base of the REST views: the agent of the URL, the caller, the JSON answer and the
JSON object body every view checks its fields with."""

from __future__ import annotations

from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request
from rest_framework.views import APIView

from artifacts_app import access, selectors
from artifacts_app.errors import ArtifactError
from artifacts_app.jsontypes import JSON, JSONObject
from artifacts_app.models import Agent
from artifacts_app.rest.auth import request_caller
from artifacts_app.rest.parsers import (
    JSONOnlyNegotiation,
    JSONParser,
)


def chunked_body(request: HttpRequest) -> bool:
    """Whether the request's body comes chunked, without a Content-Length (RFC 9112 §6.3: with
    Transfer-Encoding, a Content-Length is not what frames the body)."""
    encoding = request.META.get("HTTP_TRANSFER_ENCODING", "")
    return "chunked" in encoding.lower() and not request.META.get("CONTENT_LENGTH")


def json_response(body: JSON, status: int = 200) -> HttpResponse:
    return HttpResponse(orjson.dumps(body), status=status, content_type="application/json")


def request_agent(auth: object, slug: str) -> Agent:
    """The agent of the URL's slug. An agent key's agent came with the key (one statement,
    selectors.token_lookup): no second lookup of the slug."""
    key = getattr(auth, "key", None)
    if key is not None and key.agent_id is not None and key.agent.slug == slug:
        return key.agent
    return selectors.agent_get(slug)


class ChunkedBodyRequest(Request):
    """A DRF request whose body comes chunked: read from the request as it arrives.

    DRF reads a body without Content-Length as empty (its ``stream`` is None); a chunked one
    (HTTP/1.1: a client that streams what it does not know the length of) is the request itself,
    read as it arrives (``agent_site.server`` streams it, its limit applied as it comes). DRF's
    parsing reads the body from ``stream``, its public property, which this class answers."""

    def __init__(self, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        self.chunked_source = request

    @property
    def stream(self) -> HttpRequest:
        return self.chunked_source


class AgentView(APIView):
    """Base: resolves the agent from the URL's slug and the caller from the request."""

    parser_classes = [JSONParser]
    content_negotiation_class = JSONOnlyNegotiation

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        if not chunked_body(request):
            return super().initialize_request(request, *args, **kwargs)
        # As APIView.initialize_request, with the class that reads a chunked body.
        return ChunkedBodyRequest(
            request,
            parsers=self.get_parsers(),
            authenticators=self.get_authenticators(),
            negotiator=self.get_content_negotiator(),
            parser_context=self.get_parser_context(request),
        )

    def agent(self) -> Agent:
        return request_agent(self.request.auth, self.kwargs["slug"])

    def caller(self) -> access.Caller:
        return request_caller(self.request)

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # HttpResponse
        # API.md "Errors": OPTIONS is authenticated like GET (401 without credentials, 404 for
        # an unknown agent) and says only which methods the route has — never DRF's metadata
        # with the views' docstrings.
        access.require(self.caller(), self.agent(), access.Action.READ)
        response = HttpResponse(status=204)
        response["Allow"] = ", ".join(self.allowed_methods)
        return response


def object_body(body: JSON, allowed: frozenset[str]) -> JSONObject:
    if not isinstance(body, dict):
        raise ArtifactError("invalid_body", "The body must be a JSON object.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ArtifactError(
            "unknown_field",
            f"Unknown field {unknown[0]!r}; the fields are {', '.join(sorted(allowed))}.",
            {"fields": unknown},
        )
    return body
