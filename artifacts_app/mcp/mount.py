"""``/<slug>/mcp``: our door in front of the MCP SDK's Streamable HTTP session manager.

The path, the Host, the agent and the bearer credentials are settled here, the way REST settles
them (``access``: the same ``Caller``), before the SDK sees the request: an unknown agent answers
the 404 envelope, no credentials 401, another agent's key 403 — all in API.md's error envelope.
A bearer credential that does not authenticate is counted against the client's address
(``throttle``), as in REST: past the limit, 429 ``too_many_attempts`` with ``Retry-After``.
What passes carries the resolved ``Call`` in the ASGI scope (the handlers read it from
``ctx.request.scope``) and an SDK ``AuthenticatedUser`` naming the credential, so the SDK binds each
MCP session to the key or token that opened it (another credential gets 404 for that session).

The session manager needs a running task group (``StreamableHTTPSessionManager.run``), normally
entered by an ASGI lifespan. Daphne sends no lifespan events, so the first request of an event loop
starts it in a task of its own; it runs as long as the loop (one per server process).
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson
from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Send

from artifacts_app import access, logs, metrics, selectors, throttle
from artifacts_app.errors import ArtifactError, TooManyAttemptsError, UnauthenticatedError
from artifacts_app.mcp.call import CALL, Call
from artifacts_app.mcp.server import build_server
from artifacts_app.mcp.watch import serve_guarded
from artifacts_app.models import Agent
from artifacts_app.names import RESERVED_SLUGS

PATH = re.compile(r"^/(?P<slug>[^/]+)/mcp$")
# A session idle this long (no request in flight, no open stream) is closed by the SDK.
IDLE_TIMEOUT = 30 * 60


class McpMount:
    """ASGI: ``/<slug>/mcp`` to the MCP server, every other request to ``inner``."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    # ``send: Any``: the site's server sends dict messages and the SDK's ASGI type takes any mutable
    # mapping; no one type fits both without a cast.
    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] == "http":
            match = PATH.match(scope.get("path", ""))
            if match is not None and match["slug"] not in RESERVED_SLUGS:
                await serve(match["slug"], scope, receive, _counted(scope, send))
                return
        await self.inner(scope, receive, send)


_METHODS = frozenset({"GET", "POST", "DELETE", "OPTIONS", "HEAD"})


def _counted(scope: dict[str, Any], send: Any) -> Any:
    """``send``, with the exchange given its request id (``X-Request-ID``), counted by status,
    timed to its response's headers and given its access line (docs/operations.md "Metrics" and
    "Logs": route ``mcp``), as ``monitoring`` does for Django's routes."""
    started = time.perf_counter()
    method = scope.get("method", "")
    method = method if method in _METHODS else "other"
    given = _header(scope, b"x-request-id")
    rid = logs.request_id(None if given is None else given.decode("latin-1"))

    async def counted_send(message: Any) -> None:
        if message["type"] == "http.response.start":
            elapsed = time.perf_counter() - started
            status = message["status"]
            message = {
                **message,
                "headers": [*message.get("headers", ()), (b"x-request-id", rid.encode())],
            }
            metrics.HTTP_REQUESTS.labels("mcp", method, str(status)).inc()
            metrics.HTTP_LATENCY.labels("mcp", method).observe(elapsed)
            logs.access_line(
                request_id=rid,
                method=method,
                path=scope.get("path", ""),
                route="mcp",
                status=status,
                seconds=elapsed,
                caller=None,
                agent=scope.get("path", "").split("/")[1] or None,
            )
        await send(message)

    return counted_send


async def envelope(
    send: Send,
    status: int,
    code: str,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = orjson.dumps({"error": {"code": code, "message": message}})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _header(scope: dict[str, Any], name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


def _scheme(scope: dict[str, Any]) -> str:
    """The scheme the client used: behind a trusted proxy, Django's SECURE_PROXY_SSL_HEADER."""
    trusted = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if trusted:
        name, value = trusted  # ("HTTP_X_FORWARDED_PROTO", "https")
        raw = _header(scope, name.removeprefix("HTTP_").lower().replace("_", "-").encode())
        if raw is not None and raw.decode("latin-1").split(",")[0].strip() == value:
            return "https"
    return str(scope.get("scheme") or "http")


def _host_allowed(host: str) -> bool:
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:  # Django's own default under DEBUG
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def _query(scope: dict[str, Any], name: str) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    return values[-1] if values else None


def resolve(slug: str, authorization: bytes | None, address: str) -> tuple[Agent, access.Caller]:
    """The agent and the caller, or an ``ArtifactError`` (404, 401, 403, 429) as REST would
    answer; ``address`` is the client's, for a credential that fails (``throttle``)."""
    agent = selectors.agent_get(slug)  # unknown agent: 404 for everyone, as in REST
    caller = access.caller_from_authorization(authorization)
    if caller is None:
        if authorization and access.bearer_token(authorization) is not None:
            throttle.failure(address)  # past the limit: TooManyAttemptsError, 429
            raise UnauthenticatedError("invalid_token", access.INVALID_TOKEN_MESSAGE)
        caller = access.ANONYMOUS_CALLER
    access.require(caller, agent, access.Action.READ)  # 401 no credentials, 403 another agent's key
    return agent, caller


async def serve(slug: str, scope: dict[str, Any], receive: Receive, send: Any) -> None:
    host = (_header(scope, b"host") or b"").decode("latin-1")
    if not _host_allowed(host):
        await envelope(
            send,
            400,
            "invalid_host",
            "The Host header names a host this server does not answer to (DJANGO_ALLOWED_HOSTS).",
        )
        return
    try:
        agent, caller = await database_sync_to_async(resolve)(
            slug, _header(scope, b"authorization"), throttle.scope_address(scope)
        )
    except ArtifactError as error:
        extra = []
        if error.status == 401:
            extra = [(b"www-authenticate", b'Bearer realm="agent-artifacts"')]
        elif isinstance(error, TooManyAttemptsError):
            extra = [(b"retry-after", str(error.retry_after).encode())]
        await envelope(send, error.status, error.code, error.message, extra)
        return
    key = caller.key
    assert key is not None  # a bearer caller always has its key
    call = Call(
        agent=agent,
        caller=caller,
        base_url=f"{_scheme(scope)}://{host}",
        session_id=_query(scope, "sessionId"),
        turn_id=_query(scope, "turnId"),
    )
    token = AccessToken(token="", client_id=f"{agent.pk}/{key.pk}", scopes=[])
    scope = {**scope, CALL: call, "user": AuthenticatedUser(token)}
    manager = await session_manager(scope)
    grant = access.Grant(caller=caller, agent=agent, events=False)
    await serve_guarded(grant, manager.handle_request, scope, receive, send)


# --- the session managers of an event loop, started on first use ------------------------------


@dataclass
class _Running:
    handshake: StreamableHTTPSessionManager  # 2025-era requests: stateful sessions
    modern: StreamableHTTPSessionManager  # 2026-07-28 requests: no session
    ready: asyncio.Event
    task: asyncio.Task[None] | None = None


_running: dict[asyncio.AbstractEventLoop, _Running] = {}


def _is_modern(scope: dict[str, Any]) -> bool:
    version = _header(scope, b"mcp-protocol-version")
    return version is not None and version.decode("latin-1") in MODERN_PROTOCOL_VERSIONS


async def session_manager(scope: dict[str, Any]) -> StreamableHTTPSessionManager:
    """The running session manager of this event loop for this request's era.

    Two, because the eras want different answers to a POST. 2025 sessions answer in JSON
    (``json_response``): their notifications ride the session's GET stream, and a JSON answer
    costs far less than an SSE stream per request (bench/mcp_vs_rest.py: tools/call 0.42x of REST over SSE).
    The 2026 wire answers in SSE, which ``subscriptions/listen`` needs: its answer is the stream.
    The SDK routes by the same header; a 2026 request carries no session, so either could serve it.
    """
    loop = asyncio.get_running_loop()
    found = _running.get(loop)
    if found is None:
        for old in [lp for lp in _running if lp.is_closed()]:
            del _running[old]
        server = build_server()
        found = _running[loop] = _Running(
            handshake=StreamableHTTPSessionManager(
                app=server,
                # Stateful: resources/subscribe and list_changed reach a 2025-era client on its
                # session's GET stream.
                stateless=False,
                json_response=True,
                session_idle_timeout=IDLE_TIMEOUT,
            ),
            modern=StreamableHTTPSessionManager(app=server, session_idle_timeout=IDLE_TIMEOUT),
            ready=asyncio.Event(),
        )
        # A blank context: the request's contextvars must not become every session's.
        found.task = loop.create_task(_run(found), context=contextvars.Context())
    await found.ready.wait()
    return found.modern if _is_modern(scope) else found.handshake


async def _run(running: _Running) -> None:
    async with running.handshake.run(), running.modern.run():
        running.ready.set()
        await asyncio.Event().wait()  # until the loop ends with the process
