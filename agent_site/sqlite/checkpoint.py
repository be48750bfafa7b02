"""WAL checkpoints off the request path: one thread per process and database file.

SQLite checkpoints inside the commit that takes the WAL past ``wal_autocheckpoint`` pages: that
commit copies the WAL's pages into the database and fsyncs both, ~30 ms here, a third of the
average commit's cost, and a tag's tail latency (docs/architecture.md, "SQLite"). Here every commit
through the site's backend tells this process's checkpointer, whose thread, after ``GATHER``
seconds in which more commits may come, runs a ``PASSIVE`` checkpoint on a connection of its own:
it never waits for a lock and never blocks a writer or a reader, and the sqlite3 module lets other
threads run while it works. A writer that finds the WAL wholly copied starts it again from its
beginning, so the WAL stays small and ``wal_autocheckpoint`` (left on) is only the safety net for
writes this thread is not told of (autocommit statements) or a thread that fell behind. An idle
process does nothing: the thread waits for the next commit.

Each checkpoint opens a connection of its own (~40 µs here), read-write without creating the
file, and closes it; none is opened while the database has no WAL file. So a database removed
underneath (a test run's) is not made anew and keeps no connection of this thread open (nor its
WAL and shared-memory files), and a path that names another file (a restore) is checkpointed as
it is now. A child process made by ``fork`` gets a checkpointer of its own (threads do not
survive a fork).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

GATHER = 0.025  # seconds of commits one checkpoint covers, at most, while writes go on


class Checkpointer:
    """The checkpoints of one database file in this process (``for_file``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.checkpoints = 0  # run so far (tests, docs/benchmarks.md)
        self._uri = Path(path).resolve().as_uri() + "?mode=rw"
        self._wrote = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self.pid == os.getpid() and self._thread.is_alive()

    def wrote(self) -> None:
        """A transaction was committed: checkpoint soon."""
        self._wrote.set()

    def _run(self) -> None:
        while True:
            self._wrote.wait()
            time.sleep(GATHER)
            self._wrote.clear()
            if not self._present():
                # No database (yet, or any more), or no WAL: its last connection closed, and
                # checkpointed it. Opening one now would make a WAL, left behind if the database
                # is removed meanwhile (a test run's, at its end).
                continue
            try:
                self._checkpoint()
            except Exception as exc:  # the thread must outlive any one failure
                if not self._present():
                    continue  # removed while it was checkpointed (a test run's, at its end)
                # The commit's own autocheckpoint still applies; say so once, not per commit.
                if not self._failing:
                    log.warning("WAL checkpoint of %s failed: %s", self.path, exc)
                    self._failing = True
            else:
                if self._failing:
                    log.info("WAL checkpoints of %s work again", self.path)
                    self._failing = False

    def _present(self) -> bool:
        """The database and its WAL are there (a removed database's WAL may outlive it)."""
        return os.path.exists(self.path) and os.path.exists(self.path + "-wal")

    def _checkpoint(self) -> None:
        db = sqlite3.connect(self._uri, uri=True, isolation_level=None, timeout=1.0)
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            db.close()
        self.checkpoints += 1


_checkpointers: dict[str, Checkpointer] = {}
_lock = threading.Lock()


def for_file(path: str) -> Checkpointer:
    """This process's checkpointer of the database file at ``path`` (started on first use)."""
    with _lock:
        checkpointer = _checkpointers.get(path)
        if checkpointer is None or not checkpointer.alive():
            checkpointer = _checkpointers[path] = Checkpointer(path)
        return checkpointer
