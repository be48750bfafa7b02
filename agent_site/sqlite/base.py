"""Django's SQLite backend, with a health check for connections that outlive a request.

Connections live as long as the request thread that opened them (DESIGN.md §10,
``CONN_MAX_AGE = None`` with ``CONN_HEALTH_CHECKS``). Django's SQLite backend always answers "usable"
(an embedded database has no server to lose), but a file can be replaced underneath a long-lived
connection — a restore from a backup, a test that swaps the file: the old connection would go on
reading and writing the unlinked inode, silently. Here a connection remembers the (device, inode)
of its file and is usable only while the path still names that file; the check is one ``stat`` at
the first query of each request.

Each commit tells this process's checkpointer of the file (``checkpoint.py``), which checkpoints
the WAL on a thread of its own instead of inside a request's commit.

Writers of one process queue for the file's write lock on a lock of the process
(``_write_lock``), taken where Django begins a transaction (``BEGIN IMMEDIATE``) and given back at
its commit, rollback or the connection's close. SQLite's own busy handler makes a waiting writer
sleep in growing steps (up to 100 ms) and try again, so with twenty request threads tagging, a
write that lost the race waited for a sleep to end, not for the lock to be free: the tag's median
was ~9 ms and its p99 ~550 ms. A lock of the process wakes the next writer as the last one ends.
Writers in other processes (``manage.py`` commands) still meet SQLite's busy handler, as before.

Its cursor also remembers the last few hundred statements' conversion from Django's ``%s``
placeholders to SQLite's ``?`` (a regular expression per statement, ~5% of a tag's time): the
conversion depends on the text alone, and the hot statements' texts are built once
(``artifacts_app/services/_sql.py``).

This module is the adapter for Django's SQLite backend (written for Django 5.2). Django offers no
public hook where a transaction begins, commits or rolls back, or where a connection closes, so
it overrides the backend's private methods that do, each calling Django's own; pinned by
``tests/adapters/test_django_pin.py``:

- ``DatabaseWrapper._start_transaction_under_autocommit`` (``BEGIN`` of an ``atomic`` block,
  called by ``BaseDatabaseWrapper.set_autocommit``);
- ``DatabaseWrapper._commit``, ``_rollback``, ``_close`` (called by the public ``commit``,
  ``rollback`` and ``close``);
- ``SQLiteCursorWrapper.convert_query(query, *, param_names=None)`` and the module's
  ``FORMAT_QMARK_REGEX`` (public names, undocumented: the placeholder conversion).
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base

from agent_site.sqlite import checkpoint


@lru_cache(maxsize=512)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()


def _write_lock(name: str) -> threading.Lock:
    with _write_locks_guard:
        return _write_locks.setdefault(os.path.realpath(name), threading.Lock())


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: Any = None) -> str:
        if param_names is None and len(query) < 4096:  # long texts are one-offs (IN lists)
            return _qmark(query)
        return str(super().convert_query(query, param_names=param_names))


class DatabaseWrapper(base.DatabaseWrapper):
    _file_identity: tuple[int, int] | None = None
    _checkpointer: checkpoint.Checkpointer | None = None
    _holds_write: threading.Lock | None = None

    def _identity(self) -> tuple[int, int] | None:
        name = str(self.settings_dict["NAME"])
        if self.is_in_memory_db() or name.startswith("file:"):
            return None
        try:
            stat = os.stat(name)
        except OSError:
            return None
        return (stat.st_dev, stat.st_ino)

    def get_new_connection(self, conn_params: Any) -> Any:
        connection = super().get_new_connection(conn_params)
        self._file_identity = self._identity()
        if self._file_identity is not None:
            self._checkpointer = checkpoint.for_file(str(self.settings_dict["NAME"]))
        return connection

    def _start_transaction_under_autocommit(self) -> None:
        if self._file_identity is not None and self._holds_write is None:
            lock = _write_lock(str(self.settings_dict["NAME"]))
            timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
            if not lock.acquire(timeout=timeout):
                # What SQLite answers a writer that waited its busy timeout out, as Django wraps it.
                with self.wrap_database_errors:
                    raise self.Database.OperationalError("database is locked")
            self._holds_write = lock
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._end_write()
            raise

    def _end_write(self) -> None:
        lock, self._holds_write = self._holds_write, None
        if lock is not None:
            lock.release()

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # (Django has it; its stubs do not)
        finally:
            self._end_write()
        if self._checkpointer is not None:
            self._checkpointer.wrote()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]
        finally:
            self._end_write()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]
        finally:
            self._end_write()

    def create_cursor(self, name: Any = None) -> Any:
        return self.connection.cursor(factory=SQLiteCursorWrapper)

    def is_usable(self) -> bool:
        if self._file_identity is None:
            return True
        return self._identity() == self._file_identity
