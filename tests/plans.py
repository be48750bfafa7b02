"""Query plans in tests: a statement's plan as text, and PostgreSQL statistics that read tables as
empty at any size (what lured the planner into per-row scans: the versions backfill, gc_blobs)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from artifacts_app import services
from artifacts_app.models import Artifact, ArtifactVersion


def explain(sql: str, params=()) -> str:
    """The plan of ``sql`` as this database's EXPLAIN prints it (SQLite: EXPLAIN QUERY PLAN)."""
    prefix = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    with connection.cursor() as cursor:
        cursor.execute(prefix + sql, params)
        return "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())


class _RolledBack(Exception):
    pass


def records_analysed_as_empty() -> None:
    """Leave the artifact and version tables analysed while they held only rolled-back rows, as a
    test worker's earlier tests do: pages but no live rows (relpages > 0, reltuples = 0), so
    PostgreSQL reads both tables as empty at any size until they are analysed again."""
    scratch = services.agent_create(slug="rolled-back", max_artifacts=1000)
    with pytest.raises(_RolledBack), transaction.atomic():
        for i in range(300):
            services.artifact_tag(agent=scratch, key=f"k{i}", data={"pad": "x" * 500})
        raise _RolledBack
    tables = [Artifact._meta.db_table, ArtifactVersion._meta.db_table]
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"ANALYZE {table}")
        cursor.execute(
            "SELECT relname, relpages > 0 AND reltuples = 0 FROM pg_class WHERE relname = ANY(%s)",
            [tables],
        )
        assert dict(cursor.fetchall()) == dict.fromkeys(tables, True)
