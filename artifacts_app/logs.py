"""The site's log lines (docs/operations.md "Logs"): plain text, or one JSON object per line.

``REQUEST_ID`` holds the id of the request being answered (set by
``monitoring.RequestMiddleware``); ``RequestIdFilter`` puts it on every record logged while the
request runs, so that Django's own lines ("Not Found: …") carry it as the access line does.
``JsonFormatter`` is python-json-logger's (serialized by orjson: a line costs half as much as with
``json``), told to leave out the objects Django attaches to its
records (the request, whose text holds the query string; a socket): a line holds what was logged
on purpose, never a header, a cookie or a body.

This module imports nothing of the app: the settings' ``LOGGING`` names it before apps load.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from contextvars import ContextVar

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.orjson import OrjsonFormatter

REQUEST_ID: ContextVar[str | None] = ContextVar("artifacts_request_id", default=None)

# A client's (or a proxy's) X-Request-ID is kept when it is short and plain: letters, digits and
# ``.-_:/+=``, 1 to 128 of them (a UUID, a ULID, base64 of 16 bytes…). Anything else gets an id
# of ours: a header must not put newlines, quotes or megabytes into the logs.
_REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")


# A new id: 16 random hex digits drawn once per process, then a counter. Unique across processes
# and restarts (the random part), without a system call per request (uuid4 reads the OS's random
# source each time); an id names a request, it grants nothing, so it need not be unguessable.
_PREFIX = os.urandom(8).hex()
_COUNTER = itertools.count(1)


def _redraw() -> None:
    global _PREFIX
    _PREFIX = os.urandom(8).hex()  # a forked process (a server that preloads) draws its own


os.register_at_fork(after_in_child=_redraw)


def request_id(given: str | None) -> str:
    """The request's id: ``given`` (the ``X-Request-ID`` header) when it is acceptable, else a
    new one (32 hex digits)."""
    if given is not None and _REQUEST_ID_PATTERN.fullmatch(given):
        return given
    return f"{_PREFIX}{next(_COUNTER):016x}"


ACCESS = logging.getLogger("artifacts.access")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")


def clean(text: str, limit: int) -> str:
    """``text`` for a log line: control characters replaced, at most ``limit`` characters."""
    return _UNSAFE.sub("?", text[:limit])


def access_line(
    *,
    request_id: str,
    method: str,
    path: str,
    route: str,
    status: int,
    seconds: float,
    caller: str | None,
    agent: str | None,
) -> None:
    """The one access line of a request (logger ``artifacts.access``, INFO): Django's routes
    (``monitoring.RequestMiddleware``) and ``/<slug>/mcp`` alike. ``path`` without its query."""
    if not ACCESS.isEnabledFor(logging.INFO):
        return
    path = clean(path, 256)
    duration_ms = round(seconds * 1000, 1)
    ACCESS.info(
        f"{method} {path} {status} {duration_ms} ms",
        extra={
            "request_id": request_id,
            "method": method,
            "path": path,
            "route": route,
            "status": status,
            "duration_ms": duration_ms,
            "caller": caller,
            "agent": None if agent is None else clean(agent, 64),
        },
    )


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to records logged while a request is answered (or about one: Django's
    ``django.request`` lines carry the request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            request = record.__dict__.get("request")
            rid = getattr(request, "request_id", None) or REQUEST_ID.get()
            if rid is not None:
                record.request_id = rid
        return True


# Objects that Django, daphne and the ASGI servers attach to records: never written out.
_NOT_WRITTEN = ("request", "scope", "server_time", "connection", "environ")


class JsonFormatter(OrjsonFormatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, the record's extra
    fields (``request_id``, ``route``, ``status``…) and ``exc_info`` when there is one."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("fmt", ["levelname", "name", "message"])
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", "time")
        kwargs.setdefault("reserved_attrs", [*RESERVED_ATTRS, *_NOT_WRITTEN])
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
