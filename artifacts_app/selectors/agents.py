"""Reads of agents, sessions, users and keys: each lookup written once.

``agent_get`` and ``session_pk`` run on every tag, so they are SQL (``_sql``); the rest is ORM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

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


def agents_all(*, limit: int = AGENTS_LISTED) -> list[Agent]:
    """Agents (id and slug only), alphabetically: the streams of every agent at once."""
    return list(Agent.objects.order_by("slug").only("pk", "slug")[:limit])


def agents_by_pk(pks: list[int]) -> list[Agent]:
    return list(Agent.objects.filter(pk__in=pks))


def agent_last_seq(agent_id: int) -> int:
    """The seq of the agent's newest event (0: none yet)."""
    return Agent.objects.filter(pk=agent_id).values_list("last_seq", flat=True).first() or 0


def session_pk(agent_id: int, sid: str, *, cursor: CursorWrapper | None = None) -> int | None:
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


# --- the credentials of open streams, asked again while they stay open --------------------------


class Credentials(NamedTuple):
    """What one open stream holds: the key or token it was opened with, the user behind it, the
    browser's Django session (a cookie caller), the session it watches as ``(agent_id, sid)``."""

    key_id: int | None = None
    user_id: int | None = None
    cookie: str | None = None
    session: tuple[int, str] | None = None


@dataclass(frozen=True)
class CredentialsState:
    """The state now of the credentials asked about (``credentials_state``)."""

    keys: frozenset[int]  # the keys and tokens still active (a revoked or deleted one is absent)
    users: dict[int, tuple[bool, bool]]  # (is_active, is_staff) of the users that still exist
    cookies: frozenset[str]  # the Django sessions still alive
    sessions: dict[tuple[int, str], int | None]  # the owner of each session that still exists


PARAMS_PER_STATEMENT = 5000  # below every SQLite's limit on variables


def _django_sessions_in_db() -> bool:
    return settings.SESSION_ENGINE in (
        "django.contrib.sessions.backends.db",
        "django.contrib.sessions.backends.cached_db",
    )


def credentials_state(wanted: Iterable[Credentials]) -> CredentialsState:
    """The state now of every credential in ``wanted``, in ONE statement (a ``UNION ALL`` of four
    indexed lookups) per ``PARAMS_PER_STATEMENT`` distinct values, whatever the number of streams
    that share them. With a session engine that keeps no rows (cache, signed cookies), cookies are
    taken as alive: their users are still asked about."""
    key_ids: set[int] = set()
    user_ids: set[int] = set()
    cookies: set[str] = set()
    sessions: set[tuple[int, str]] = set()
    for item in wanted:
        if item.key_id is not None:
            key_ids.add(item.key_id)
        if item.user_id is not None:
            user_ids.add(item.user_id)
        if item.cookie is not None:
            cookies.add(item.cookie)
        if item.session is not None:
            sessions.add(item.session)
    alive_cookies: set[str] = set()
    if not _django_sessions_in_db():
        alive_cookies, cookies = cookies, set()
    keys: set[int] = set()
    users: dict[int, tuple[bool, bool]] = {}
    owners: dict[tuple[int, str], int | None] = {}
    values: list[tuple[str, _Wanted]] = (
        [("key", v) for v in key_ids]
        + [("user", v) for v in user_ids]
        + [("cookie", v) for v in cookies]
        + [("session", v) for v in sessions]
    )
    per_statement = PARAMS_PER_STATEMENT // 2  # a session is two parameters
    for start in range(0, len(values), per_statement):
        chunk = values[start : start + per_statement]
        for row in _credentials_rows(chunk):
            if row.what == 1:
                keys.add(int(row.id))
            elif row.what == 2:
                users[int(row.id)] = (bool(row.active), bool(row.staff))
            elif row.what == 3:
                alive_cookies.add(str(row.text))
            else:
                owners[(int(row.id), str(row.text))] = row.owner_id
    return CredentialsState(frozenset(keys), users, frozenset(alive_cookies), owners)


class _CredentialRow(NamedTuple):
    """One row of ``credentials_state``'s statement: which lookup answered (``what``) and what it
    found; the fields another lookup has are null."""

    what: int  # 1 an active key, 2 a user, 3 a live cookie, 4 a session
    id: int  # the key's, the user's or the session's agent's
    owner_id: int | None  # the session's owner
    active: bool | None  # the user's
    staff: bool | None  # the user's
    text: str | None  # the cookie's session key, or the session's sid


_NULL_OF = {
    "id": "CAST(NULL AS INTEGER)",
    "owner_id": "CAST(NULL AS INTEGER)",
    "active": "CAST(NULL AS BOOLEAN)",
    "staff": "CAST(NULL AS BOOLEAN)",
    "text": "CAST(NULL AS TEXT)",
}


def _credential_columns(quote: Callable[[str], str], columns: dict[str, str]) -> str:
    """One lookup's select list, written from ``_CredentialRow``'s fields (null where the
    lookup has none), so that each row is read into it by name."""
    return ", ".join(
        f"{columns.get(name) or _NULL_OF[name]} AS {quote(name)}" for name in _CredentialRow._fields
    )


# What ``credentials_state`` asks about: a key's or a user's id, a cookie's session key, or an
# (agent id, sid) pair.
_Wanted = int | str | tuple[int, str]


def _flat(values: list[_Wanted]) -> list[int | str]:
    """The statement's parameters for these values (a pair is two)."""
    out: list[int | str] = []
    for value in values:
        out += value if isinstance(value, tuple) else [value]
    return out


def _credentials_rows(chunk: list[tuple[str, _Wanted]]) -> list[_CredentialRow]:
    from django.contrib.sessions.models import Session as DjangoSession

    db = connections[DEFAULT_DB_ALIAS]
    q = db.ops.quote_name
    user_model: Any = get_user_model()  # (the stubs' user model has no columns to name)
    users = user_model._meta
    by_kind: dict[str, list[_Wanted]] = {}
    for what, value in chunk:
        by_kind.setdefault(what, []).append(value)
    parts: list[str] = []
    params: list[int | str | None] = []

    def marks(n: int) -> str:
        return ", ".join(["%s"] * n)

    if ids := by_kind.get("key"):
        parts.append(
            f"SELECT {_credential_columns(q, {'what': '1', 'id': q('id')})} "
            f"FROM {q(ApiKey._meta.db_table)} "
            f"WHERE {q('revoked_at')} IS NULL AND {q('id')} IN ({marks(len(ids))})"
        )
        params += _flat(ids)
    if ids := by_kind.get("user"):
        pk = q(users.pk.column)
        active, staff = (q(users.get_field(name).column) for name in ("is_active", "is_staff"))
        parts.append(
            f"SELECT {_credential_columns(q, {'what': '2', 'id': pk, 'active': active, 'staff': staff})} "
            f"FROM {q(users.db_table)} WHERE {pk} IN ({marks(len(ids))})"
        )
        params += _flat(ids)
    if keys := by_kind.get("cookie"):
        parts.append(
            f"SELECT {_credential_columns(q, {'what': '3', 'text': q('session_key')})} "
            f"FROM {q(DjangoSession._meta.db_table)} "
            f"WHERE {q('session_key')} IN ({marks(len(keys))}) AND {q('expire_date')} > %s"
        )
        params += _flat(keys)
        params.append(db.ops.adapt_datetimefield_value(timezone.now()))
    if pairs := by_kind.get("session"):
        # One (agent, sid) each: the unique index answers every term.
        terms = " OR ".join([f"({q('agent_id')} = %s AND {q('sid')} = %s)"] * len(pairs))
        columns = {"what": "4", "id": q("agent_id"), "owner_id": q("owner_id"), "text": q("sid")}
        parts.append(
            f"SELECT {_credential_columns(q, columns)} "
            f"FROM {q(Session._meta.db_table)} WHERE {terms}"
        )
        params += _flat(pairs)
    with db.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        return [_CredentialRow._make(row) for row in cursor.fetchall()]
