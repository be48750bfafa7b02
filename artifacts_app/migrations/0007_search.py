"""Search (API.md "Search", DESIGN.md §15): the words index, written by every tag from now on.

SQLite: an FTS5 table of words (``head``, ``tail``) keyed by a row table (artifact id → rowid),
and a trigger that removes both when a record goes, however it goes (delete, eviction, pruning,
its agent's deletion). PostgreSQL: a ``tsvector`` column on the record with a GIN index, and a GIN
index (``jsonb_path_ops``) on ``data`` for ``where``'s equalities. The words' own tokenizer is
ours (``artifacts_app.search``): FTS5 is told that every character but a space belongs to a word.

Records stored before this migration are indexed by ``manage.py search_backfill`` (resumable,
batch by batch, beside live tags); a blob's ``words`` are filled by it too.
"""

from __future__ import annotations

from django.db import migrations, models

FTS = "artifacts_app_artifact_fts"
ROWS = "artifacts_app_artifact_fts_row"
TRIGGER = "artifacts_app_artifact_fts_gone"
TOKENIZE = "unicode61 remove_diacritics 0 categories 'L* N* M* S* P* C*'"

SQLITE = [
    f"CREATE TABLE {ROWS} (id INTEGER PRIMARY KEY, artifact_id varchar(40) NOT NULL UNIQUE)",
    f'CREATE VIRTUAL TABLE {FTS} USING fts5(head, tail, tokenize="{TOKENIZE}")',
    f"CREATE TRIGGER {TRIGGER} AFTER DELETE ON artifacts_app_artifact BEGIN "
    f"DELETE FROM {FTS} WHERE rowid = (SELECT id FROM {ROWS} WHERE artifact_id = old.id); "
    f"DELETE FROM {ROWS} WHERE artifact_id = old.id; END",
]
SQLITE_REVERSE = [f"DROP TRIGGER {TRIGGER}", f"DROP TABLE {FTS}", f"DROP TABLE {ROWS}"]

POSTGRESQL = [
    "ALTER TABLE artifacts_app_artifact ADD COLUMN search_words tsvector",
    "CREATE INDEX artifact_search_words ON artifacts_app_artifact USING gin (search_words)",
    "CREATE INDEX artifact_data_paths ON artifacts_app_artifact USING gin (data jsonb_path_ops)",
]
POSTGRESQL_REVERSE = [
    "DROP INDEX artifact_data_paths",
    "DROP INDEX artifact_search_words",
    "ALTER TABLE artifacts_app_artifact DROP COLUMN search_words",
]


def _run(statements: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    def run(apps, schema_editor):  # type: ignore[no-untyped-def]
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts_app", "0006_event_agent_type_created"),
    ]

    operations = [
        migrations.AddField(
            model_name="blob",
            name="words",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name="artifact",
            index=models.Index(fields=["updated_at", "id"], name="artifact_updated"),
        ),
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRESQL}),
            _run({"sqlite": SQLITE_REVERSE, "postgresql": POSTGRESQL_REVERSE}),
        ),
    ]
