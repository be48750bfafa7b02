"""Bearer authentication (agent keys, user tokens) beside Django's session cookie (DESIGN.md §8).

The header is read by ``access.caller_from_authorization``, which the websocket middleware uses too.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions

from artifacts_app.access import (
    ANONYMOUS_CALLER,
    INVALID_TOKEN_MESSAGE,
    Caller,
    bearer_token,
    caller_from_authorization,
    caller_from_user,
)


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
