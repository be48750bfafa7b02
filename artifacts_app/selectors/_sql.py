"""The reads every tag or authenticated request makes, as SQL (bench/tag.py: the ORM's Python
around each statement cost as much as the rest of a tag). Portable to SQLite and PostgreSQL; names
quoted by the connection, rows read by name. Each statement's text is built once per database
vendor (quoting names on every call cost ~15% of a tag), and the connection is taken from the
proxy once per call."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeAlias

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, Model
from django.utils.dateparse import parse_datetime

from artifacts_app.models import Agent, ApiKey, Session

Quote: TypeAlias = Callable[[str], str]

# An agent's kinds declared over HTTP are not read with its row (registry.spec_for finds them by
# the row's kinds_hash, and loads the deferred column only once per process and declaration).
AGENT_HOT_FIELDS = [field for field in Agent._meta.concrete_fields if field.attname != "kinds"]
AGENT_FIELDS = tuple(field.attname for field in AGENT_HOT_FIELDS)


def q(name: str) -> str:
    return connection.ops.quote_name(name)


def aware(value: object) -> datetime:
    """A datetime column's value as read: SQLite hands datetimes back as text, PostgreSQL as
    aware datetimes."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if not isinstance(value, datetime):
        raise TypeError(f"not a datetime column's value: {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


_BUILT: dict[tuple[str, str], str] = {}


def _statement(db: BaseDatabaseWrapper, build: Callable[[Quote], str]) -> str:
    """The text ``build(quote_name)`` makes for ``db``'s vendor, built on first use."""
    sql = _BUILT.get((db.vendor, build.__name__))
    if sql is None:
        sql = _BUILT[(db.vendor, build.__name__)] = build(db.ops.quote_name)
    return str(sql)


def _agent_by_slug_sql(quote: Quote) -> str:
    columns = ", ".join(quote(name) for name in AGENT_FIELDS)
    return f"SELECT {columns} FROM {quote(Agent._meta.db_table)} WHERE slug = %s"


def _session_pk_sql(quote: Quote) -> str:
    return f"SELECT id FROM {quote(Session._meta.db_table)} WHERE agent_id = %s AND sid = %s"


def agent_by_slug(slug: str) -> Agent | None:
    """The agent row for ``slug``, as the ORM would load it."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(_statement(db, _agent_by_slug_sql), [slug])
        row = cursor.fetchone()
    if row is None:
        return None
    values = dict(zip(AGENT_FIELDS, row, strict=True))
    values["created_at"] = aware(values["created_at"])
    return Agent.from_db(db.alias, list(AGENT_FIELDS), list(values.values()))


def _instance(model: type[Model], fields: list[Field], row: tuple[object, ...]) -> Model:
    # What the ORM's converters would do for these columns on SQLite (text datetimes, 0/1
    # booleans); PostgreSQL hands both back typed already.
    values = []
    for field, value in zip(fields, row, strict=True):
        if value is not None:
            internal = field.get_internal_type()
            if internal == "DateTimeField":
                value = aware(value)
            elif internal == "BooleanField":
                value = bool(value)
        values.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], values)


@cache  # the models and their fields are fixed once Django has set up
def _api_key_parts() -> list[tuple[type[Model], str, list[Field]]]:
    from django.contrib.auth import get_user_model

    from artifacts_app.models import ApiKey

    user_model: Any = get_user_model()
    return [
        (ApiKey, "k", list(ApiKey._meta.concrete_fields)),
        (Agent, "a", AGENT_HOT_FIELDS),
        (user_model, "u", list(user_model._meta.concrete_fields)),
    ]


def _column(field: Field | None) -> str:
    if field is None or field.column is None:
        raise TypeError(f"{field!r} has no column")
    return field.column


def _api_key_sql(quote: Quote) -> str:
    (key_model, _, _), _, (user_model, _, _) = parts = _api_key_parts()
    columns = ", ".join(
        f"{alias}.{quote(_column(f))}" for _, alias, fields in parts for f in fields
    )
    return (
        f"SELECT {columns} FROM {quote(key_model._meta.db_table)} k "
        f"LEFT JOIN {quote(Agent._meta.db_table)} a ON a.id = k.agent_id "
        f"LEFT JOIN {quote(user_model._meta.db_table)} u "
        f"ON u.{quote(_column(user_model._meta.pk))} = k.user_id "
        "WHERE k.secret_hash = %s AND k.revoked_at IS NULL"
    )


def api_key_by_hash(secret_hash: str) -> ApiKey | None:
    """The active key or token with this hash, with its agent or user loaded, in one indexed
    statement (the unique ``secret_hash``; two primary-key joins). Every authenticated request runs
    it; through the ORM's ``select_related`` it cost a third of a tag over HTTP."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(_statement(db, _api_key_sql), [secret_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    instances = []
    start = 0
    for model, _, fields in _api_key_parts():
        chunk = row[start : start + len(fields)]
        start += len(fields)
        instances.append(None if chunk[0] is None else _instance(model, fields, chunk))
    key: Any = instances[0]
    agent, user = instances[1], instances[2]
    key.agent = agent
    key.user = user
    return key


def session_pk(agent_id: int, sid: str, *, cursor: CursorWrapper | None = None) -> int | None:
    """The session's row id; on the caller's ``cursor`` when it has one open (a tag, under its
    lock)."""
    if cursor is None:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            return session_pk(agent_id, sid, cursor=cursor)
    cursor.execute(_statement(cursor.db, _session_pk_sql), [agent_id, sid])
    row = cursor.fetchone()
    if row is None:
        return None
    (pk,) = row
    return int(pk)
