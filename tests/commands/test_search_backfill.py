"""``manage.py search_backfill``: records stored before search get their words, beside tags."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from artifacts_app import selectors, services
from artifacts_app.services import _index


def unindex_everything() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("UPDATE artifacts_app_artifact SET search_words = NULL")
        else:
            cursor.execute("DELETE FROM artifacts_app_artifact_fts")
            cursor.execute("DELETE FROM artifacts_app_artifact_fts_row")


def found(agent, q) -> set[str | None]:
    return {r.key for r in selectors.artifacts_all(agent=agent, q=q)}


def test_backfill_command_indexes_what_is_missing_and_runs_again_harmlessly(freeform):
    for i in range(3):
        services.artifact_tag(agent=freeform, kind="note", key=f"k{i}", data={"w": "jujube"})
    unindex_everything()
    assert found(freeform, "jujube") == set()
    out = io.StringIO()
    call_command("search_backfill", "--batch", "2", stdout=out)
    assert "Indexed 3 record(s)" in out.getvalue()
    assert found(freeform, "jujube") == {"k0", "k1", "k2"}
    again = io.StringIO()
    call_command("search_backfill", stdout=again)
    assert "Indexed 0 record(s)" in again.getvalue()


def test_backfill_leaves_a_record_tagged_meanwhile_as_its_tag_indexed_it(freeform):
    ids = [
        services.artifact_tag(agent=freeform, kind="note", key=f"k{i}", data={"w": "old"}).record.id
        for i in range(3)
    ]
    unindex_everything()

    def tag_meanwhile(done: int, last: str) -> None:
        if done == 1:
            services.artifact_tag(agent=freeform, kind="note", key="k2", data={"w": "new"})

    assert services.search_backfill(batch=1, on_batch=tag_meanwhile) == 2
    assert found(freeform, "new") == {"k2"}
    assert found(freeform, "old") == {"k0", "k1"}
    # A write of words read before a tag (an older version) changes nothing.
    with connection.cursor() as cursor:
        assert not _index.index_write(
            cursor, ids[2], agent_id=freeform.pk, kind="note", key="k2", title=None, data={"w": "stale"}, content=None,
            version=1,
        )  # fmt: skip
    assert found(freeform, "stale") == set()


def test_backfill_refuses_a_bad_batch(db):
    with pytest.raises(CommandError, match="--batch"):
        call_command("search_backfill", "--batch", "0")
