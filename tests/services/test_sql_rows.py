"""The tag's statements (services/_sql.py) write and read rows by name."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from django.db import connection

from artifacts_app import selectors, services
from artifacts_app.models import Agent
from artifacts_app.services import _sql


def _names(cursor: _sql.Cursor) -> list[str]:
    return [column[0] for column in cursor.description]


def test_each_read_answers_the_columns_its_row_names(freeform: Agent, alice) -> None:
    # The database names each column of a read as the field of the row it is read into, in the
    # row's order: a column cannot land in another's field.
    services.session_create(agent=freeform, sid="s_rows", owner=alice)
    record = services.artifact_tag(
        agent=freeform, kind="note", key="k", data={"v": 1}, session_id="s_rows", contents=b"x"
    ).record
    with connection.cursor() as cursor:
        sql = _sql.statements(cursor)
        cursor.execute(sql.agent_lock, [freeform.pk])
        assert _names(cursor) == list(_sql.Counters._fields)
        cursor.execute(sql.previous, [record.id])
        assert _names(cursor) == list(_sql.Previous._fields)
        cursor.execute(sql.pin_read, [record.id, freeform.pk])
        assert _names(cursor) == list(_sql._PinRead._fields)
        _sql.versions_delete(cursor, [record.id])  # (the foreign key holds at the test's end)
        cursor.execute(sql.delete_returning.format(where="id = %s"), [record.id])
        assert _names(cursor) == list(_sql.Deleted._fields)


def test_the_previous_row_holds_each_value_under_its_name(freeform: Agent, alice) -> None:
    services.session_create(agent=freeform, sid="s_rows", owner=alice)
    first = services.artifact_tag(
        agent=freeform,
        kind="note",
        key="k",
        data={"v": 1},
        session_id="s_rows",
        contents=b"abc",
        content_type="text/plain",
    ).record
    services.artifact_pin(agent=freeform, artifact_id=first.id, pinned=True)
    with connection.cursor() as cursor:
        previous = _sql.artifact_previous(cursor, first.id)
    assert previous is not None
    assert previous._asdict() == {
        "session_id": selectors.session_pk(freeform.pk, "s_rows"),
        "blob_id": first.content.sha256,
        "blob_size": 3,
        "content_type": "text/plain",
        "created_at": first.created_at,
        "version": 1,
        "pinned": True,
        "oldest_version": 1,
        "session_sid": "s_rows",
        "kind": "note",
    }


def test_a_write_takes_each_value_by_its_name() -> None:
    write = _sql._update(
        str, "t", {"number": "number", "data": "data"}, where={"number": "oldest", "id": "id"}
    )
    assert write.sql == "UPDATE t SET number = %s, data = %s WHERE number = %s AND id = %s"
    assert write.params({"id": "a", "oldest": 1, "data": "{}", "number": 11}) == (11, "{}", 1, "a")
    insert = _sql._insert(str, "t", {"id": "artifact_id", "created_at": "at"})
    assert insert.sql == "INSERT INTO t (id, created_at) VALUES (%s, %s)"
    assert insert.params({"at": "now", "artifact_id": "a"}) == ("a", "now")
    assert _sql._insert(str, "t", {"id": "artifact_id"}).params({"artifact_id": "a"}) == ("a",)


def test_a_select_list_must_name_every_field_of_its_row_and_no_other() -> None:
    class Row(NamedTuple):
        a: int
        b: int

    assert _sql._select_list(str, Row, {"b": "x.b", "a": "x.a"}) == "x.a AS a, x.b AS b"
    with pytest.raises(RuntimeError, match="Row"):
        _sql._select_list(str, Row, {"a": "x.a"})
    with pytest.raises(RuntimeError, match="Row"):
        _sql._select_list(str, Row, {"a": "x.a", "b": "x.b", "c": "x.c"})
