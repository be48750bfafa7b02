"""Django's SQLite backend, with a health check for connections that outlive a request.

Connections live as long as the request thread that opened them (DESIGN.md §10,
``CONN_MAX_AGE = None`` with ``CONN_HEALTH_CHECKS``). Django's SQLite backend always answers "usable"
(an embedded database has no server to lose), but a file can be replaced underneath a long-lived
connection — a restore from a backup, a test that swaps the file: the old connection would go on
reading and writing the unlinked inode, silently. Here a connection remembers the (device, inode)
of its file and is usable only while the path still names that file; the check is one ``stat`` at
the first query of each request.
"""

from __future__ import annotations

import os
from typing import Any

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    _file_identity: tuple[int, int] | None = None

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
        return connection

    def is_usable(self) -> bool:
        if self._file_identity is None:
            return True
        return self._identity() == self._file_identity
