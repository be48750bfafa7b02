"""WAL checkpoints run on the checkpointer's thread, not in a request's commit
(agent_site/sqlite/checkpoint.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from django.db import connection

from agent_site.settings import sqlite_database
from agent_site.sqlite import checkpoint
from agent_site.sqlite.base import DatabaseWrapper as SQLiteWrapper
from tests.servers import wait_for


def _rows_in_the_database_file(path: Path, tmp: Path) -> int:
    """The rows of ``t`` in the database file alone, without its WAL: what checkpoints copied."""
    alone = tmp / "alone.sqlite3"
    shutil.copyfile(path, alone)
    with contextlib.closing(sqlite3.connect(alone)) as db:
        try:
            return db.execute("SELECT count(*) FROM t").fetchone()[0]
        except sqlite3.OperationalError:  # not even the table yet
            return -1


def _open_files_under(folder: Path) -> list[str]:
    """This process's open file descriptors on files in ``folder``."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


@pytest.fixture
def site_wrapper(tmp_path):
    """A connection of the site's SQLite backend, with the site's settings, on a file of its own
    (the default database may be PostgreSQL: the scale profile)."""
    path = tmp_path / "db.sqlite3"
    settings = {**connection.settings_dict, **sqlite_database(path), "NAME": str(path), "TEST": {}}
    wrapper = SQLiteWrapper(settings, alias="checkpoints")
    with wrapper.cursor() as cursor:
        cursor.execute("CREATE TABLE t (v TEXT)")
    yield wrapper, path
    wrapper.close()


@pytest.mark.django_db
def test_commits_are_checkpointed_on_the_checkpointers_thread(site_wrapper, tmp_path):
    wrapper, path = site_wrapper
    checkpointer = checkpoint.for_file(str(path))
    assert checkpointer is wrapper._checkpointer
    before = checkpointer.checkpoints
    for i in range(50):
        wrapper.set_autocommit(False)
        with wrapper.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (%s)", [f"row {i}"])
        wrapper.commit()
        wrapper.set_autocommit(True)
    # 50 small commits are far below wal_autocheckpoint (10,000 pages): no commit checkpointed.
    # Yet the rows reach the database file, copied there by the thread.
    wait_for(lambda: _rows_in_the_database_file(path, tmp_path) == 50, "50 rows checkpointed", 10)
    assert checkpointer.checkpoints > before
    # Idle: no commits, no checkpoints.
    settled = checkpointer.checkpoints
    time.sleep(checkpoint.GATHER * 8)
    assert checkpointer.checkpoints == settled


def _wal_writer(path: Path) -> sqlite3.Connection:
    """A connection that keeps ``path`` in WAL mode with one row in its WAL, left to the
    checkpointer (its own autocheckpoint off)."""
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (v TEXT)")
    writer.execute("INSERT INTO t VALUES ('a row')")
    return writer


def test_a_removed_database_is_not_made_anew_and_a_replaced_one_is_followed(tmp_path):
    path = tmp_path / "gone.sqlite3"
    writer = _wal_writer(path)
    checkpointer = checkpoint.for_file(str(path))
    checkpointer.wrote()
    wait_for(lambda: checkpointer.checkpoints == 1, "the first checkpoint", 10)
    assert _rows_in_the_database_file(path, tmp_path) == 1

    writer.close()  # the last connection: SQLite checkpoints and removes the WAL
    # Each checkpoint's connection was closed after it: with the writer's gone, nothing of this
    # process holds the file (SQLite parks a closed connection's descriptor while another
    # connection of the process holds locks on the file).
    assert not _open_files_under(tmp_path)
    path.unlink()
    checkpointer.wrote()
    time.sleep(checkpoint.GATHER * 8)
    # A test run's database, removed: not created again, and no WAL made for it.
    assert not path.exists() and not Path(f"{path}-wal").exists()
    assert checkpointer.checkpoints == 1

    # The path names another file (a restore): its WAL is the one checkpointed now.
    writer = _wal_writer(path)
    checkpointer.wrote()
    wait_for(lambda: checkpointer.checkpoints == 2, "the restored file checkpointed", 10)
    assert _rows_in_the_database_file(path, tmp_path) == 1
    writer.close()


def test_a_checkpointer_whose_thread_is_gone_is_started_anew(tmp_path):
    # After a fork the child holds the parent's checkpointer, whose thread did not come along.
    path = str(tmp_path / "forked.sqlite3")
    first = checkpoint.for_file(path)
    assert checkpoint.for_file(path) is first
    first.pid = -1  # as the child sees it: made by another process
    again = checkpoint.for_file(path)
    assert again is not first and again.alive()


def test_a_failing_checkpoint_is_told_once_and_a_removed_database_not_at_all(tmp_path, caplog):
    path = tmp_path / "broken.sqlite3"
    path.write_bytes(b"not a database" * 100)
    Path(f"{path}-wal").write_bytes(b"")
    checkpointer = checkpoint.for_file(str(path))
    with caplog.at_level("INFO", logger=checkpoint.__name__):
        for _ in range(3):
            checkpointer.wrote()
            time.sleep(checkpoint.GATHER * 4)

        def told() -> list[str]:  # this checkpointer's lines (another database's may come too)
            return [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]

        wait_for(told, "the failure told", 10)
        assert told() == [f"WAL checkpoint of {path} failed: file is not a database"]  # once
        caplog.clear()

        # A database removed while its checkpoint ran (a test run's, at its end): nothing to tell.
        def removed_meanwhile() -> None:
            path.unlink()
            raise sqlite3.OperationalError("disk I/O error")

        checkpointer._failing = False
        checkpointer._checkpoint = removed_meanwhile  # type: ignore[method-assign]
        checkpointer.wrote()
        wait_for(lambda: not path.exists(), "the checkpoint that found it removed", 10)
        time.sleep(checkpoint.GATHER * 4)
        assert told() == [] and checkpointer._thread.is_alive()
