"""What an operator watches (docs/operations.md "Metrics", "Logs"): each request counted, timed
and logged, and ``/metrics`` for Prometheus.

- ``RequestMiddleware`` (first in ``MIDDLEWARE``, so the tag's lean road runs it too) gives each
  request its id (``X-Request-ID``: the one sent when it is plain and short, else a new one; always
  echoed in the response), counts it by route, method and status, times it to its response, and
  writes one access line: id, method, path (never the query), route, status, duration, the
  caller's kind and the agent. Never a header, a cookie, a token or a body.
- ``metrics_view`` answers the exposition (``metrics.exposition``) and each dependency's state,
  asked at the scrape with ``/healthz``'s probes, to staff (a session or a staff user's token) or
  ``Authorization: Bearer <ARTIFACTS_METRICS_TOKEN>``; anyone else gets the API's error envelope
  (401 without credentials or with unknown ones, 403 for a caller who is not staff).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from artifacts_app import access, health, logs, metrics, throttle
from artifacts_app.door import envelope_response
from artifacts_app.errors import TooManyAttemptsError

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# Each (route, method, status)'s counter and histogram children, looked up once: prometheus_client's
# ``labels`` takes a lock and checks the values on every call. Bounded as the labels are.
_Children = tuple[Any, Any]
_children: dict[tuple[str, str, int], _Children] = {}


def _observed(route: str, method: str, status: int) -> _Children:
    key = (route, method, status)
    found = _children.get(key)
    if found is None:
        found = _children[key] = (
            metrics.HTTP_REQUESTS.labels(route, method, str(status)),
            metrics.HTTP_LATENCY.labels(route, method),
        )
    return found


def route_of(request: HttpRequest) -> str:
    """The URL pattern's name (with its namespace) that answered ``request``: a bounded label,
    never the path. ``static`` for files served before routing, ``unmatched`` when no pattern
    matched."""
    match = request.resolver_match
    if match is not None:
        return match.view_name
    if request.path.startswith(f"/{settings.STATIC_URL.lstrip('/')}"):
        return "static"
    return "unmatched"


def _agent_of(request: HttpRequest) -> str | None:
    match = request.resolver_match
    slug = match.kwargs.get("slug") if match is not None else None
    return None if slug is None else str(slug)


def _caller_kind(request: HttpRequest) -> str:
    """The caller as the API resolved it, without resolving it again (no query after the
    response): a bearer caller, a session user the view looked at, else ``session`` for a
    cookie nobody read or ``anonymous``."""
    named = getattr(request, "caller_kind", None)
    if named is not None:
        return str(named)
    # The kind is a label of the line here, never compared: access.py holds the rules.
    resolved = getattr(request, "auth", None)
    if isinstance(resolved, access.Caller):
        return resolved.kind
    user = request.__dict__.get("user")
    # type(), not isinstance(): a lazy user not yet read must stay unread.
    if user is not None and issubclass(type(user), AbstractUser):
        return access.caller_from_user(user).kind
    if settings.SESSION_COOKIE_NAME in request.COOKIES:
        return "session"
    return access.ANONYMOUS


class RequestMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.log_requests = bool(getattr(settings, "ARTIFACTS_ACCESS_LOG", True))

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        rid = logs.request_id(request.META.get("HTTP_X_REQUEST_ID"))
        request.request_id = rid  # type: ignore[attr-defined]
        token = logs.REQUEST_ID.set(rid)
        try:
            response = self.get_response(request)
            elapsed = time.perf_counter() - started
            response["X-Request-ID"] = rid
            route = route_of(request)
            method = request.method if request.method in _METHODS else "other"
            status = response.status_code
            counted, timed = _observed(route, method, status)
            counted.inc()
            timed.observe(elapsed)
            if self.log_requests:
                logs.access_line(
                    request_id=rid,
                    method=method,
                    path=request.path,
                    route=route,
                    status=status,
                    seconds=elapsed,
                    caller=_caller_kind(request),
                    agent=_agent_of(request),
                )
            return response
        finally:
            logs.REQUEST_ID.reset(token)


# --- /metrics ------------------------------------------------------------------------------------


class _Dependencies(Collector):
    """Each dependency's state, asked now (``health.dependency_checks``): 1 up, 0 not."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            metrics.DEPENDENCY_UP,
            "Whether each dependency answered /healthz's probe at this scrape (1) or not (0).",
            labels=["dependency"],
        )
        for name, check in health.dependency_checks().items():
            family.add_metric([name], 1.0 if check["status"] == health.OK else 0.0)
        yield family


def _metrics_token_matches(given: str) -> bool:
    expected = str(getattr(settings, "ARTIFACTS_METRICS_TOKEN", "") or "")
    return bool(expected) and hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), expected.encode()
    )


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the caller may read the metrics, else the envelope that refuses it."""
    header = request.META.get("HTTP_AUTHORIZATION")
    given = access.bearer_token(header)
    if given is not None:
        if _metrics_token_matches(given):
            request.caller_kind = "metrics_token"  # type: ignore[attr-defined]  # the access line
            return None
        caller = access.caller_from_authorization(header)
        if caller is None:
            try:
                throttle.failure(throttle.request_address(request))
            except TooManyAttemptsError as error:
                response = envelope_response(error.status, error.code, error.message)
                response["Retry-After"] = str(error.retry_after)
                return response
            return envelope_response(401, "invalid_token", access.INVALID_TOKEN_MESSAGE)
    else:
        caller = access.caller_from_user(getattr(request, "user", None))
        if not caller.is_authenticated:
            return envelope_response(
                401,
                "not_authenticated",
                "Send `Authorization: Bearer <ARTIFACTS_METRICS_TOKEN>`, or log in as staff.",
            )
    request.auth = caller  # type: ignore[attr-defined]  # as DRF's request does (the access line)
    if not access.is_staff(caller.user):  # the staff rule (an agent key has no user)
        return envelope_response(403, "forbidden", "Only staff may read the metrics.")
    return None


@never_cache
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: Prometheus' text format, for staff or the metrics token."""
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    if request.method not in ("GET", "HEAD"):
        response = envelope_response(
            405, "method_not_allowed", f"Method {request.method} is not allowed here; use GET."
        )
        response["Allow"] = "GET, HEAD"
        return response
    return HttpResponse(
        metrics.exposition(_Dependencies()),
        content_type="text/plain; version=0.0.4; charset=utf-8",
    )
