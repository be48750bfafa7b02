"""Reads of agents, sessions, users and keys: each lookup written once.

``agent_get`` and ``session_pk`` run on every tag, so they are SQL (``_sql``); the rest is ORM.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from artifacts_app.errors import ArtifactError, NotFoundError
from artifacts_app.models import Agent, ApiKey, Session
from artifacts_app.names import AGENT_KEY_PREFIX, SLUG_RE, USER_TOKEN_PREFIX, secret_hash
from artifacts_app.selectors import _sql
from artifacts_app.values import text_problem

AGENTS_LISTED = 500


def agent_get(agent: Agent | str) -> Agent:
    """The agent row for a slug (or the row itself); unknown slugs raise ``NotFoundError``."""
    if isinstance(agent, Agent):
        return agent
    # A string that cannot be a slug names no agent: answered without a query, so that a NUL or a
    # lone surrogate in a URL never reaches SQL (PostgreSQL would refuse it with a 500).
    found = (
        _sql.agent_by_slug(agent) if isinstance(agent, str) and SLUG_RE.fullmatch(agent) else None
    )
    if found is None:
        raise NotFoundError("unknown_agent", f"There is no agent {agent!r}.")
    return found


def agent_find(slug: str) -> Agent | None:
    """The agent row for ``slug``, or None (pages that answer their own 404)."""
    return _sql.agent_by_slug(slug) if isinstance(slug, str) and SLUG_RE.fullmatch(slug) else None


def agent_slugs(*, limit: int = AGENTS_LISTED) -> list[str]:
    """Slugs of agents, alphabetically (the playground's picker)."""
    return list(Agent.objects.order_by("slug").values_list("slug", flat=True)[:limit])


def agents_by_pk(pks: list[int]) -> list[Agent]:
    return list(Agent.objects.filter(pk__in=pks))


def agent_last_seq(agent_id: int) -> int:
    """The seq of the agent's newest event (0: none yet)."""
    return Agent.objects.filter(pk=agent_id).values_list("last_seq", flat=True).first() or 0


def session_pk(agent_id: int, sid: str, *, cursor: Any = None) -> int | None:
    """The row id of the agent's session ``sid``, or None (on ``cursor``: a tag's, under its lock)."""
    return _sql.session_pk(agent_id, sid, cursor=cursor)


class SessionOwner(NamedTuple):
    pk: int
    owner_id: int | None


def session_owner(agent_id: int, sid: str) -> SessionOwner | None:
    """The row id and owner of the agent's session ``sid``, or None when there is none."""
    row = Session.objects.filter(agent_id=agent_id, sid=sid).values_list("pk", "owner_id").first()
    return None if row is None else SessionOwner(*row)


def user_get(user: AbstractBaseUser | str) -> Any:
    """The row of ``settings.AUTH_USER_MODEL`` for a username (or the row itself); unknown raises
    ``ArtifactError``."""
    if isinstance(user, AbstractBaseUser):
        return user
    model: Any = get_user_model()
    found = (
        model.objects.filter(**{model.USERNAME_FIELD: user}).first()
        if isinstance(user, str) and text_problem(user) is None
        else None
    )
    if found is None:
        raise ArtifactError("unknown_user", f"There is no user {user!r}.")
    return found


def token_lookup(secret: str) -> ApiKey | None:
    """The active key or token with this secret, or None (unknown or revoked)."""
    if not isinstance(secret, str) or not secret.startswith((AGENT_KEY_PREFIX, USER_TOKEN_PREFIX)):
        return None
    # One indexed statement, the key with its agent or user (selectors/_sql.py).
    key: ApiKey | None = _sql.api_key_by_hash(secret_hash(secret))
    return key
