"""Creating sessions."""

from __future__ import annotations

import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from artifacts_app import selectors
from artifacts_app.errors import ConflictError
from artifacts_app.models import Agent, Session
from artifacts_app.services.rules import check_session_id


def session_create(
    *, agent: Agent | str, sid: str | None = None, owner: AbstractBaseUser | str | None = None
) -> Session:
    """A session of ``agent``; ``sid`` None → generated; ``owner`` a user, a username or None."""
    agent = selectors.agent_get(agent)
    if sid is None:
        sid = f"s_{secrets.token_hex(12)}"
    else:
        check_session_id(sid, field="id")
    owner_user = selectors.user_get(owner) if owner is not None else None
    try:
        with transaction.atomic():
            return Session.objects.create(agent=agent, sid=sid, owner=owner_user)
    except IntegrityError:
        raise ConflictError(
            "session_exists",
            f"Session {sid!r} exists already for agent {agent.slug!r}; choose another id.",
        ) from None
