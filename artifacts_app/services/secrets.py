"""Agent keys and user tokens: made, shown once, stored as hashes, revoked (DESIGN.md §8)."""

from __future__ import annotations

import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from artifacts_app import selectors
from artifacts_app.errors import NotFoundError
from artifacts_app.models import Agent, ApiKey
from artifacts_app.names import AGENT_KEY_PREFIX, LABEL_MAX, USER_TOKEN_PREFIX, secret_hash
from artifacts_app.values import check_text


def _new_secret(prefix: str) -> tuple[str, str]:
    public = prefix + secrets.token_hex(4)
    return public, f"{public}_{secrets.token_urlsafe(32)}"


def agent_key_create(*, agent: Agent | str, label: str = "") -> tuple[ApiKey, str]:
    """A new agent key: full rights over that one agent. The secret is returned once, never stored."""
    agent = selectors.agent_get(agent)
    check_text(label, field="label", code="invalid_label")
    public, secret = _new_secret(AGENT_KEY_PREFIX)
    key = ApiKey.objects.create(
        kind=ApiKey.KIND_AGENT,
        agent=agent,
        prefix=public,
        secret_hash=secret_hash(secret),
        label=label[:LABEL_MAX],
    )
    return key, secret


def user_token_create(*, user: AbstractBaseUser | str, label: str = "") -> tuple[ApiKey, str]:
    """A new user token: acts as that user. The secret is returned once, never stored."""
    user_obj = selectors.user_get(user)
    check_text(label, field="label", code="invalid_label")
    public, secret = _new_secret(USER_TOKEN_PREFIX)
    key = ApiKey.objects.create(
        kind=ApiKey.KIND_USER,
        user=user_obj,
        prefix=public,
        secret_hash=secret_hash(secret),
        label=label[:LABEL_MAX],
    )
    return key, secret


def token_revoke(*, token: str) -> ApiKey:
    """Revoke the agent key or user token with this secret; unknown or revoked → ``NotFoundError``."""
    key = selectors.token_lookup(token)
    if key is None:
        raise NotFoundError(
            "unknown_token", "That token is unknown or already revoked; nothing was changed."
        )
    return api_key_revoke(key_id=key.pk)


def api_key_revoke(*, key_id: int) -> ApiKey:
    """Revoke a key or token by its row id (the admin's way: it never sees the secret)."""
    updated = ApiKey.objects.filter(pk=key_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if not updated:
        raise NotFoundError(
            "unknown_token", "That token is unknown or already revoked; nothing was changed."
        )
    return ApiKey.objects.get(pk=key_id)


def agent_keys_revoke(*, agent: Agent | str, label: str) -> int:
    """Revoke the agent's active keys with this label; answers how many."""
    agent = selectors.agent_get(agent)
    return ApiKey.objects.filter(agent=agent, label=label, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
