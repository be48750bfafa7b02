"""Shared by agents and users: a new secret shown once, and a revoke that asks first."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join

from artifacts_app.admin.display import EMPTY, iso
from artifacts_app.models import ApiKey

SECRETS_REFUSED = (
    "Only a superuser, or a user with the API key permissions (artifacts_app.add_apikey to "
    "create, artifacts_app.change_apikey to revoke), may create or revoke keys and tokens; "
    "nothing was changed."
)


def show_secret_once(
    request: HttpRequest, admin_site, *, key: ApiKey, secret: str, owner: str, back: str
) -> HttpResponse:
    """The only page that ever shows the secret: not cached, not stored, not logged."""
    response = TemplateResponse(
        request,
        "admin/artifacts_app/secret_once.html",
        {
            **admin_site.each_context(request),
            "title": f"New {key.get_kind_display()} for {owner}",
            "key": key,
            "secret": secret,
            "owner": owner,
            "back": back,
        },
    )
    response["Cache-Control"] = "no-store"
    return response


def keys_table(keys, revoke_url) -> str:
    if not keys:
        return "No keys yet."
    rows = format_html_join(
        "",
        "<tr><td><code>{}…</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                key.prefix,
                key.label or EMPTY,
                iso(key.created_at),
                format_html("revoked {}", iso(key.revoked_at))
                if key.revoked_at
                else format_html('<a class="button" href="{}">Revoke</a>', revoke_url(key)),
            )
            for key in keys
        ),
    )
    return format_html(
        "<table><thead><tr><th>prefix</th><th>label</th><th>created</th><th></th></tr></thead>"
        "<tbody>{}</tbody></table>",
        rows,
    )


def revoked_message(request: HttpRequest, key: ApiKey) -> None:
    messages.success(
        request, f"Revoked {key.get_kind_display()} {key.prefix}…; it gets 401 from now on."
    )
