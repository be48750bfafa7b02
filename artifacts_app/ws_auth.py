"""Who is on the other end of a websocket (DESIGN.md §8), for the consumers to ask ``access``.

``Authorization: Bearer <agent key | user token>`` wins when present (no ``Origin`` needed: it is not
a browser's ambient credential). Otherwise the Django session cookie, and then only from an
``Origin`` whose host is in ``ALLOWED_HOSTS`` (no ``Origin``: refused) — a page on another site must
not ride a logged-in browser's cookie. The middleware never refuses by itself: it puts the caller
and, when the credentials are bad, the close code and reason into the scope, and the consumer
accepts and closes with them (API.md: 4401 / 4403), so the client learns why. A bearer credential
that does not authenticate is counted against the client's address (``throttle``): past the limit
the close code is 4408, "too many attempts" — a refusal, not 4429's "reconnect at once".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import validate_host

from artifacts_app import access, faults, throttle
from artifacts_app.consumers import CALLER, REFUSAL, UNAVAILABLE, UNAVAILABLE_REASON
from artifacts_app.errors import TooManyAttemptsError

# Too many failed authentications from this address (the reason says for how long): not retried.
TOO_MANY_ATTEMPTS = 4408

# The ASGI shapes these wrappers pass on (Channels ships no types): a scope and a message are dicts
# of whatever the server and the middleware put in them.
Scope: TypeAlias = dict[str, Any]
Message: TypeAlias = dict[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
App: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def origin_allowed(origin: str | None) -> bool:
    if not origin:
        return False
    host = urlsplit(origin).hostname
    if not host:
        return False
    if ":" in host:  # IPv6 literal, as ALLOWED_HOSTS writes it
        host = f"[{host}]"
    return validate_host(host, settings.ALLOWED_HOSTS)


async def _failed(scope: Scope, refusal: tuple[int, str]) -> tuple[int, str]:
    """The refusal of credentials that did not authenticate, counted (``throttle``; a cache
    round trip at scale, off the event loop)."""
    address = throttle.scope_address(scope)
    try:
        await sync_to_async(throttle.failure, thread_sensitive=False)(address)
    except TooManyAttemptsError as error:
        return TOO_MANY_ATTEMPTS, error.message
    return refusal


async def resolve(scope: Scope) -> tuple[access.Caller, tuple[int, str] | None]:
    header = _header(scope, b"authorization")
    if header is not None:
        if access.bearer_token(header) is None:
            refusal = (4401, "Authorization must be `Bearer <token>`.")
            return access.ANONYMOUS_CALLER, await _failed(scope, refusal)
        caller = await database_sync_to_async(access.caller_from_authorization)(header)
        if caller is None:
            refusal = (4401, access.INVALID_TOKEN_MESSAGE)
            return access.ANONYMOUS_CALLER, await _failed(scope, refusal)
        return caller, None
    caller = access.caller_from_user(scope.get("user"))
    if caller.is_authenticated and not origin_allowed(_header(scope, b"origin")):
        return caller, (4403, "A cookie-authenticated websocket must come from an allowed Origin.")
    return caller, None


class BearerAuthMiddleware:
    """Sets ``scope["artifacts_caller"]`` and ``scope["artifacts_refusal"]``."""

    def __init__(self, inner: App) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller, refusal = await resolve(scope)
        scope = {**scope, CALLER: caller, REFUSAL: refusal}
        return await self.inner(scope, receive, send)


class UnavailableGuard:
    """A database that fails while the caller is resolved (the session cookie's user, a bearer
    token) closes the handshake with 4503 (consumers.py), as a failure later on does."""

    def __init__(self, inner: App) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent = False

        async def tracked_send(message: Message) -> None:
            nonlocal sent
            sent = True
            await send(message)

        try:
            return await self.inner(scope, receive, tracked_send)
        except Exception as exc:
            if sent or faults.classify(exc) is None:
                raise
            await send({"type": "websocket.accept"})
            await send(
                {"type": "websocket.close", "code": UNAVAILABLE, "reason": UNAVAILABLE_REASON}
            )


def WsAuthStack(inner: App) -> UnavailableGuard:
    """Cookie session + user (Channels), then bearer tokens and the origin rule (ours)."""
    return UnavailableGuard(AuthMiddlewareStack(BearerAuthMiddleware(inner)))
