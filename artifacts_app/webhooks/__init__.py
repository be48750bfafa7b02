"""Webhooks: an agent's events pushed to HTTPS endpoints, signed (API.md "Webhooks").

``targets`` (the URL and address rules), ``transport`` (one delivery over vetted connections),
``signing`` (Standard Webhooks), ``engine`` (claims, ordered delivery, retries, give-up) and
``runner`` (the deliverer's threads, woken by the fan-out's hub). The routes' writes are
``services.webhooks``; reads are ``selectors.webhooks``.
"""

from __future__ import annotations

from artifacts_app.webhooks.runner import Runner, start_in_server, stop_in_server, wake_local
from artifacts_app.webhooks.signing import new_secret
from artifacts_app.webhooks.targets import InvalidWebhookUrl, check

__all__ = [
    "InvalidWebhookUrl",
    "Runner",
    "check",
    "new_secret",
    "start_in_server",
    "stop_in_server",
    "wake_local",
]
