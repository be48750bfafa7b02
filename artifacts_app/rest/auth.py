"""Bearer authentication (agent keys, user tokens) beside Django's session cookie (DESIGN.md §8).

``caller_from_authorization`` is the one reading of an ``Authorization`` header: the DRF class below
and the websocket middleware both use it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions

from artifacts_app.access import ANONYMOUS_CALLER, Caller, caller_from_key, caller_from_user
from artifacts_app.services import token_lookup

INVALID_TOKEN_MESSAGE = (
    "The bearer token is unknown or revoked; make a new one with "
    "`manage.py create_agent_key <slug>` or `create_user_token <username>`."
)


def bearer_token(header: str | bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value, or None when there is none."""
    if not header:
        return None
    if isinstance(header, bytes):
        try:
            header = header.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


def caller_from_authorization(header: str | bytes | None) -> Caller | None:
    """The caller behind an ``Authorization`` header value.

    None when the header carries no bearer token, or one that is unknown, revoked or belongs to
    an inactive user: the caller then has no credentials that count (REST: 401, websockets: 4401).
    """
    token = bearer_token(header)
    if token is None:
        return None
    key = token_lookup(token)
    if key is None:
        return None
    caller = caller_from_key(key)
    return caller if caller.is_authenticated else None


class BearerAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <agent key | user token>``; ``request.auth`` is the ``Caller``."""

    def authenticate(self, request: Any) -> tuple[Any, Caller] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if bearer_token(header) is None:
            if header and header.strip().lower().startswith("bearer"):
                raise exceptions.AuthenticationFailed(INVALID_TOKEN_MESSAGE, code="invalid_token")
            return None
        caller = caller_from_authorization(header)
        if caller is None:
            raise exceptions.AuthenticationFailed(INVALID_TOKEN_MESSAGE, code="invalid_token")
        return (caller.user or AnonymousUser(), caller)

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="agent-artifacts"'


def request_caller(request: Any) -> Caller:
    """The caller of a DRF request: its bearer key or token, else its session user, else anonymous."""
    if isinstance(request.auth, Caller):
        return request.auth
    user = request.user
    return caller_from_user(user) if user is not None else ANONYMOUS_CALLER
