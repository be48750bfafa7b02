"""Bearer authentication (agent keys, user tokens) beside Django's session cookie (DESIGN.md §8).

The header is read by ``access.caller_from_authorization``, which the websocket middleware uses too.
A bearer credential that does not authenticate is counted against the client's address
(``throttle``): past the limit it answers 429 ``too_many_attempts`` instead of 401.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.http import HttpRequest
from rest_framework import authentication, exceptions, status
from rest_framework.request import Request

from artifacts_app import throttle
from artifacts_app.access import (
    ANONYMOUS_CALLER,
    INVALID_TOKEN_MESSAGE,
    Caller,
    bearer_token,
    caller_from_authorization,
    caller_from_user,
)
from artifacts_app.errors import TooManyAttemptsError


class TooManyAttempts(exceptions.APIException):
    """``TooManyAttemptsError`` for DRF: raised while DRF authenticates, it must be DRF's own."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_attempts"

    def __init__(self, error: TooManyAttemptsError) -> None:
        super().__init__(error.message, error.code)
        self.wait = error.retry_after  # the exception handler's Retry-After


def refuse_credentials(request: Request | HttpRequest) -> exceptions.APIException:
    """The refusal of a bearer credential that did not authenticate, counted (``throttle``)."""
    try:
        throttle.failure(throttle.request_address(request))
    except TooManyAttemptsError as error:
        return TooManyAttempts(error)
    return exceptions.AuthenticationFailed(INVALID_TOKEN_MESSAGE, code="invalid_token")


class BearerAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <agent key | user token>``; ``request.auth`` is the ``Caller``."""

    def authenticate(
        self, request: Request | HttpRequest
    ) -> tuple[AbstractUser | AnonymousUser, Caller] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if bearer_token(header) is None:
            if header and header.strip().lower().startswith("bearer"):
                raise refuse_credentials(request)
            return None
        caller = caller_from_authorization(header)
        if caller is None:
            raise refuse_credentials(request)
        return (caller.user or AnonymousUser(), caller)

    def authenticate_header(self, request: Request | HttpRequest) -> str:
        return 'Bearer realm="agent-artifacts"'


def request_caller(request: Request) -> Caller:
    """The caller of a DRF request: its bearer key or token, else its session user, else anonymous."""
    if isinstance(request.auth, Caller):
        return request.auth
    user = request.user
    return caller_from_user(user) if user is not None else ANONYMOUS_CALLER
