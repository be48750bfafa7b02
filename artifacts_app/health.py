"""What the site answers while a dependency fails (docs/operations.md "When a
dependency fails"): ``/healthz`` for load balancers, and the 503/507 envelope for any request that
hits the failure.

- ``FaultsMiddleware`` turns a database or storage failure raised by a view (the REST views map
  them themselves, in ``rest.errors``) into ``faults``' refusal: the API's envelope under
  ``/<slug>/``, a plain sentence elsewhere, with ``Retry-After``. Never Django's HTML 500.
- ``server_error`` (``handler500``) does the same for a failure outside a view (a middleware
  reading the session), and answers a bug under ``/<slug>/`` with a 500 envelope.
- ``healthz`` asks each dependency, each on a thread of its own and for at most
  ``ARTIFACTS_HEALTH_TIMEOUT`` seconds. Anyone gets the overall status; each dependency's answer
  (the database vendor, free disk bytes, the layer) only staff (a session) or a monitor sending
  ``Authorization: Bearer <ARTIFACTS_HEALTH_TOKEN>``.
"""

from __future__ import annotations

import hmac
import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import orjson
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views import defaults
from django.views.decorators.cache import never_cache

from artifacts_app import access, blobs, faults, layer
from artifacts_app.door import envelope_response, is_api_path
from artifacts_app.errors import StorageFullError, UnavailableError
from artifacts_app.jsontypes import JSONObject

log = logging.getLogger(__name__)


def fault_response(request: HttpRequest, error: UnavailableError) -> HttpResponse:
    if is_api_path(request.path) or request.path.startswith("/healthz"):
        response = envelope_response(error.status, error.code, error.message)
    else:
        response = HttpResponse(
            error.message, status=error.status, content_type="text/plain; charset=utf-8"
        )
    response["Retry-After"] = faults.retry_after(error)
    return response


class FaultsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        error = faults.classify(exception)
        if error is None:
            return None
        log.error("%s: %s %s failed", error.code, request.method, request.path, exc_info=exception)
        return fault_response(request, error)


def server_error(
    request: HttpRequest, template_name: str = defaults.ERROR_500_TEMPLATE_NAME
) -> HttpResponse:
    """``handler500``: the exception being handled is ``sys.exc_info()``'s."""
    exc = sys.exc_info()[1]
    error = faults.classify(exc) if exc is not None else None
    if error is not None:
        return fault_response(request, error)
    if is_api_path(request.path):
        return envelope_response(
            500, "internal_error", "The server failed on this request; it has been logged."
        )
    return defaults.server_error(request, template_name)


# --- /healthz ------------------------------------------------------------------------------------

OK, UNAVAILABLE, FULL = "ok", "unavailable", "full"


class _Probe:
    """One dependency's probe on a thread of its own. A probe still running from an earlier call
    (a dependency that does not answer) is waited for again, never stacked behind: the threads
    and connections the health view holds stay one per dependency."""

    def __init__(self, name: str, call: Callable[[], JSONObject]) -> None:
        self.name = name
        self.call = call
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"healthz-{name}")
        self.running: Future | None = None
        self.started = 0.0
        self.lock = threading.Lock()

    def start(self) -> tuple[Future, float]:
        with self.lock:
            if self.running is None or self.running.done():
                self.running = self.executor.submit(self.call)
                self.started = time.monotonic()
            return self.running, self.started

    @staticmethod
    def answer(running: Future, started: float, deadline: float) -> JSONObject:
        try:
            details = running.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            waited = time.monotonic() - started
            return {"status": UNAVAILABLE, "error": f"no answer for {waited:.1f} s"}
        except Exception as exc:
            fault = faults.classify(exc)
            if fault is None and faults.is_storage_error(exc):
                fault = faults.storage_failure(exc)
            status = FULL if isinstance(fault, StorageFullError) else UNAVAILABLE
            return {"status": status, "error": faults.describe(exc)}
        return {"status": OK, **details}


def _database() -> JSONObject:
    from django.db import connection

    try:
        faults.database_probe()
    finally:
        # A connection per probe, closed on its thread: the probe says whether one can be made.
        connection.close()
    return {"vendor": connection.vendor}


def _channel_layer() -> JSONObject:
    return layer.layer_probe(timeout=float(settings.ARTIFACTS_HEALTH_TIMEOUT))


_PROBES = {
    "database": _Probe("database", _database),
    "storage": _Probe("storage", blobs.storage_probe),
    "channelLayer": _Probe("channelLayer", _channel_layer),
}
# Without these the service cannot answer requests: a load balancer should send none (503).
# Without the channel layer it serves every request, and events reach subscribers from the
# stored rows (replay, the fan-out's catch-up): "degraded", still 200.
_REQUIRED = ("database", "storage")


def dependency_checks() -> dict[str, JSONObject]:
    """Each dependency's answer (``{"status": "ok" | "unavailable" | "full", …}``), all asked at
    once and each waited for at most ``ARTIFACTS_HEALTH_TIMEOUT`` seconds: ``/healthz`` and
    ``/metrics`` ask the same probes."""
    deadline = time.monotonic() + float(settings.ARTIFACTS_HEALTH_TIMEOUT)
    started = {name: probe.start() for name, probe in _PROBES.items()}  # all at once
    return {name: _Probe.answer(*started[name], deadline) for name in _PROBES}


def may_see_details(request: HttpRequest) -> bool:
    """Staff (the session's user), or the health token (compared in constant time; an unset
    token lets no one in). A wrong token is no error: it gets what anyone gets."""
    expected = str(getattr(settings, "ARTIFACTS_HEALTH_TOKEN", "") or "")
    given = access.bearer_token(request.META.get("HTTP_AUTHORIZATION"))
    if expected and given is not None:
        if hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode()):
            return True
    try:
        return access.is_staff(getattr(request, "user", None))  # reads the session
    except Exception as exc:
        if faults.classify(exc) is None:
            raise
        return False  # the database that holds sessions is down: the status says so


@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    """``GET /healthz``: ``{"status": "ok" | "degraded" | "unavailable"}``; 503 when the database
    or the storage fails. For ``may_see_details``, also ``"checks": {name: {"status": "ok" |
    "unavailable" | "full", …}}``."""
    checks = dependency_checks()
    failing = [name for name, check in checks.items() if check["status"] != OK]
    if any(name in _REQUIRED for name in failing):
        status, code = UNAVAILABLE, 503
    else:
        status, code = ("degraded" if failing else OK), 200
    body: JSONObject = {"status": status}
    if may_see_details(request):
        body["checks"] = checks
    response = HttpResponse(
        orjson.dumps(body),
        status=code,
        content_type="application/json",
    )
    if code == 503:
        response["Retry-After"] = "5"
    return response
