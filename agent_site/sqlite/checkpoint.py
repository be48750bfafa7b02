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

The thread's connection opens the file read-write without creating it (a database removed
underneath, as a test run's, is not made anew), and is opened again when the path names another
file (restored from a backup, the next test database).
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


def _identity(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


class Checkpointer:
    """The checkpoints of one database file in this process (``for_file``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.checkpoints = 0  # run so far (tests, docs/benchmarks.md)
        self._wrote = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        """A transaction was committed: checkpoint soon."""
        self._wrote.set()

    def _run(self) -> None:
        db: sqlite3.Connection | None = None
        identity: tuple[int, int] | None = None
        while True:
            self._wrote.wait()
            time.sleep(GATHER)
            self._wrote.clear()
            current = _identity(self.path)
            if current is None:
                continue  # no file (yet, or any more)
            try:
                if db is None or current != identity:
                    if db is not None:
                        db.close()
                    db = None
                    uri = Path(self.path).resolve().as_uri() + "?mode=rw"
                    db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=1.0)
                    identity = current
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self.checkpoints += 1
                if self._failing:
                    log.info("WAL checkpoints of %s work again", self.path)
                    self._failing = False
            except sqlite3.Error as exc:
                # The commit's own autocheckpoint still applies; say so once, not per commit.
                if not self._failing:
                    log.warning("WAL checkpoint of %s failed: %s", self.path, exc)
                    self._failing = True
                if db is not None:
                    db.close()
                db = None


_checkpointers: dict[str, Checkpointer] = {}
_lock = threading.Lock()


def for_file(path: str) -> Checkpointer:
    """This process's checkpointer of the database file at ``path`` (started on first use)."""
    with _lock:
        checkpointer = _checkpointers.get(path)
        if checkpointer is None:
            checkpointer = _checkpointers[path] = Checkpointer(path)
        return checkpointer
