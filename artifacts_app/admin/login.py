"""The two login pages — the admin's, and ``/accounts/login/`` for people who are not staff — with
failed logins counted per client address (``throttle``, the rule the API's tokens follow).

A wrong password (or a user the page does not let in) is counted. Once the address has used up
its failures (``throttle.exceeded``), the page answers 429 with ``Retry-After`` and says so in the
form's error, WITHOUT checking the password (``authenticate`` is not called), right or wrong, until
the window ends. A password can be guessed, and a guesser who ignored the 429s would otherwise
learn which guess was right; the price is that people sharing the address (a NAT, a proxy not in
``ARTIFACTS_TRUSTED_PROXIES``) cannot log in for the rest of that window, while those already
logged in keep their sessions. Bearer tokens differ — checked first, a good one goes on — since
256-bit random secrets cannot be guessed (``throttle``; docs/architecture.md "Failed
authentications").
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from artifacts_app import throttle
from artifacts_app.errors import TooManyAttemptsError

# AuthenticationForm's codes for a login it refuses (AdminAuthenticationForm adds non-staff users
# to "invalid_login").
_REFUSED = ("invalid_login", "inactive")


class _Counted:
    """Refuses every login from an address past the limit before ``clean`` checks its password,
    and counts the logins ``clean`` refuses; the refusal for the limit is ``too_many``."""

    request: HttpRequest | None
    too_many: TooManyAttemptsError | None = None

    def clean(self) -> dict[str, Any]:
        address = throttle.request_address(self.request)
        too_many = throttle.exceeded(address)
        if too_many is not None:
            self._refuse(too_many)
        try:
            return super().clean()  # type: ignore[misc]
        except ValidationError as error:
            if getattr(error, "code", None) not in _REFUSED:
                raise
            try:
                throttle.failure(address)
            except TooManyAttemptsError as refusal:
                self._refuse(refusal)
            raise

    def _refuse(self, too_many: TooManyAttemptsError) -> NoReturn:
        self.too_many = too_many
        raise ValidationError(
            "Too many failed authentications from this address: logins from it are refused, "
            "whatever the password, for %(seconds)s s.",
            code=too_many.code,
            params={"seconds": too_many.retry_after},
        )


class LoginForm(_Counted, AuthenticationForm):
    pass


class AdminLoginForm(_Counted, AdminAuthenticationForm):
    pass


def answers_too_many(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A login view whose form ran past the limit answers its page with 429 and Retry-After."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        context = getattr(response, "context_data", None) or {}
        too_many = getattr(context.get("form"), "too_many", None)
        if isinstance(too_many, TooManyAttemptsError):
            response.status_code = too_many.status
            response["Retry-After"] = str(too_many.retry_after)
        return response

    return wrapper


admin.site.login_form = AdminLoginForm
# agent_site/urls.py routes /admin/login/ here, ahead of the admin's own URLs.
admin_login = answers_too_many(admin.site.login)
accounts_login = answers_too_many(auth_views.LoginView.as_view(authentication_form=LoginForm))
