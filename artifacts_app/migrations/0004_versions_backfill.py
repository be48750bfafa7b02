"""Every stored record becomes version 1 of itself (API.md "Versions, pins and diffs").

Runs in batches of primary keys, each its own transaction, and copies rows with one
``INSERT … SELECT`` per batch, so no row is ever loaded into Python: a million records cost a
thousand short statements, not a million objects. It can be interrupted and run again: a record
whose version is stored already is skipped (``ON CONFLICT DO NOTHING`` on the (artifact, number)
constraint). The version's moment is the record's ``updated_at`` (when the tag that stored what it
holds committed).

Why a conflict clause and not ``NOT EXISTS (SELECT … FROM versions)``: the skip must cost one
probe of the unique index per row whatever the planner believes. PostgreSQL planned that anti-join
from the versions table's statistics; analysed while it held only dead rows (inserts rolled back),
the table read as empty at any size, the plan scanned it once per record, and each batch cost
O(rows copied so far): a 200k-record backfill ran past 300 s in CI (past 120 s when those
statistics were set by hand) where it takes ~20 s with the index probe.
"""

from __future__ import annotations

from django.db import migrations, transaction

BATCH = 1000
COLUMNS = (
    "kind",
    "title",
    "data",
    "session_id",
    "turn_id",
    "source",
    "blob_id",
    "content_type",
)


def backfill(apps, schema_editor, batch: int = BATCH) -> int:
    """Insert version ``artifact.version`` of every artifact that lacks it; answers how many."""
    connection = schema_editor.connection
    q = connection.ops.quote_name
    artifacts = q(apps.get_model("artifacts_app", "Artifact")._meta.db_table)
    versions = q(apps.get_model("artifacts_app", "ArtifactVersion")._meta.db_table)
    copied = ", ".join(q(c) for c in COLUMNS)
    insert = (
        f"INSERT INTO {versions} (artifact_id, number, {copied}, created_at) "
        f"SELECT a.id, a.version, {', '.join('a.' + q(c) for c in COLUMNS)}, a.updated_at "
        f"FROM {artifacts} a WHERE a.id > %s{{upper}} "
        "ON CONFLICT (artifact_id, number) DO NOTHING"
    )
    done = 0
    low = ""
    while True:
        with connection.cursor() as cursor:
            # The batch's last id: a seek on the primary key, never a scan of what went before.
            cursor.execute(
                f"SELECT id FROM {artifacts} WHERE id > %s ORDER BY id LIMIT 1 OFFSET %s",
                [low, batch - 1],
            )
            row = cursor.fetchone()
        high = row[0] if row else None
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            if high is None:
                cursor.execute(insert.format(upper=""), [low])
            else:
                cursor.execute(insert.format(upper=" AND a.id <= %s"), [low, high])
            done += max(cursor.rowcount, 0)
        if high is None:
            return done
        low = high


def forwards(apps, schema_editor) -> None:
    backfill(apps, schema_editor)


class Migration(migrations.Migration):
    # Each batch commits on its own: a million records never make one huge transaction.
    atomic = False

    dependencies = [
        ("artifacts_app", "0003_versions"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False)]
