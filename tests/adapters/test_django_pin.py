"""Django's SQLite backend adapter (``agent_site/sqlite/base.py``) pinned to what it was written for.

The adapter overrides private methods of Django's database backend (listed at its top): a Django
release that renames them, or stops calling them from the public ``commit``, ``rollback``,
``close`` and ``set_autocommit``, would leave the process's write lock held or never taken —
silently. This fails first, loudly. The behaviour is tested in tests/settings/test_sqlite_*.py.
"""

from __future__ import annotations

import inspect

import django
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.sqlite3 import base as sqlite

from agent_site.sqlite import base as adapter

WRITTEN_FOR = "5.2."
PRIVATE_NAMES = ("_start_transaction_under_autocommit", "_commit", "_rollback", "_close")


def test_django_is_the_release_the_adapter_was_written_for():
    assert django.__version__.startswith(WRITTEN_FOR), (
        f"agent_site/sqlite/base.py was written for Django {WRITTEN_FOR}x, this is "
        f"{django.__version__}: check the names listed at its top against this release "
        "(django/db/backends/base/base.py, sqlite3/base.py), mend it, then move WRITTEN_FOR"
    )


def test_the_overridden_private_methods_are_still_djangos():
    for name in PRIVATE_NAMES:
        assert callable(getattr(sqlite.DatabaseWrapper, name, None)), name
        assert name in vars(adapter.DatabaseWrapper), name  # and they are the ones overridden


def test_the_public_methods_still_go_through_them():
    calls = {
        BaseDatabaseWrapper.commit: "self._commit()",
        BaseDatabaseWrapper.rollback: "self._rollback()",
        BaseDatabaseWrapper.close: "self._close()",
        BaseDatabaseWrapper.set_autocommit: "self._start_transaction_under_autocommit()",
    }
    for method, call in calls.items():
        assert call in inspect.getsource(method), f"{method.__qualname__} no longer calls {call}"


def test_the_placeholder_conversion_keeps_its_names():
    parameters = inspect.signature(sqlite.SQLiteCursorWrapper.convert_query).parameters
    assert list(parameters) == ["self", "query", "param_names"]
    assert parameters["param_names"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sqlite.FORMAT_QMARK_REGEX.sub("?", "a = %s AND b = %s") == "a = ? AND b = ?"
