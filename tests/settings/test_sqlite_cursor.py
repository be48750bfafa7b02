"""The site's SQLite cursor remembers placeholder conversions (agent_site/sqlite): the same answers
as Django's, whatever the text, the literal ``%%`` included."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_site.sqlite.base import SQLiteCursorWrapper, _qmark


@pytest.mark.django_db
def test_remembered_conversions_answer_as_djangos():
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite backend's cursor")
    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, SQLiteCursorWrapper)
        for _ in range(2):  # converted, then remembered
            cursor.execute("SELECT '100%%', %s, %s", ["a", 2])
            assert cursor.fetchone() == ("100%", "a", 2)
        cursor.execute("SELECT %(x)s, '5%%'", {"x": 7})  # pyformat: Django's own conversion
        assert cursor.fetchone() == (7, "5%")
    assert _qmark.cache_info().hits >= 1
