"""The two reads every tag makes, as SQL (bench/tag.py: the ORM's Python around each statement
cost as much as the rest of a tag). Portable to SQLite and PostgreSQL; names quoted by the
connection, rows read by name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.utils.dateparse import parse_datetime

from artifacts_app.models import Agent, Session

AGENT_FIELDS = tuple(field.attname for field in Agent._meta.concrete_fields)


def q(name: str) -> str:
    return connection.ops.quote_name(name)


def aware(value: Any) -> datetime:
    # SQLite hands datetimes back as text; PostgreSQL as aware datetimes.
    if isinstance(value, str):
        value = parse_datetime(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def agent_by_slug(slug: str) -> Agent | None:
    """The agent row for ``slug``, as the ORM would load it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(q(name) for name in AGENT_FIELDS)} FROM {q(Agent._meta.db_table)} "
            "WHERE slug = %s",
            [slug],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    values = dict(zip(AGENT_FIELDS, row, strict=True))
    values["created_at"] = aware(values["created_at"])
    return Agent.from_db(connection.alias, list(AGENT_FIELDS), list(values.values()))


def session_pk(agent_id: int, sid: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {q(Session._meta.db_table)} WHERE agent_id = %s AND sid = %s",
            [agent_id, sid],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    (pk,) = row
    return int(pk)
