"""Standard Webhooks signatures (https://www.standardwebhooks.com), made by the official
``standardwebhooks`` library's public ``Webhook.sign``: what a receiver verifies with any Standard
Webhooks library is exactly what signed it here."""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime

from standardwebhooks import Webhook

PREFIX = "whsec_"


def new_secret() -> str:
    """A new signing secret: ``whsec_`` and the base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> list[tuple[str, str]]:
    """The request's headers: content type and the three Standard Webhooks headers."""
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(timestamp, UTC), body)
    return [
        ("content-type", "application/json"),
        ("user-agent", "agent-artifacts-webhooks/1"),
        ("webhook-id", msg_id),
        ("webhook-timestamp", str(timestamp)),
        ("webhook-signature", signature),
    ]
