"""Writers of one process queue for the SQLite file's write lock on a lock of the process
(agent_site/sqlite): taken where a transaction begins, given back at its commit, its rollback, a
failed begin, or the connection's close — never kept, or every writer of the process would wait
its busy timeout out. Embedded profile only (the SQLite backend)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from agent_site.sqlite.base import _write_lock
from artifacts_app.models import Agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lock() -> threading.Lock:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite backend's write lock")
    connection.ensure_connection()
    return _write_lock(str(connection.settings_dict["NAME"]))


def test_a_transaction_holds_the_process_lock_until_it_commits(lock):
    assert not lock.locked()
    with transaction.atomic():
        Agent.objects.filter(slug="none").update(max_artifacts=1)
        assert lock.locked()
    assert not lock.locked()


def test_a_rolled_back_transaction_gives_the_lock_back(lock):
    with pytest.raises(RuntimeError), transaction.atomic():
        assert lock.locked()
        raise RuntimeError("rolled back")
    assert not lock.locked()


def test_a_closed_connection_gives_the_lock_back(lock):
    block = transaction.atomic()
    block.__enter__()
    try:
        assert lock.locked()
        connection.close()  # a thread that ends with its transaction open
        assert not lock.locked()
    finally:
        block.__exit__(None, None, None)


def test_a_second_writer_waits_for_the_first_and_then_writes(lock):
    order: list[str] = []
    started = threading.Event()

    def second() -> None:
        try:
            started.set()
            with transaction.atomic():
                order.append("second")
                Agent.objects.filter(slug="none").update(max_artifacts=2)
        finally:
            connections.close_all()

    with transaction.atomic():
        Agent.objects.filter(slug="none").update(max_artifacts=1)
        thread = threading.Thread(target=second)
        thread.start()
        started.wait(5)
        thread.join(0.3)  # it cannot begin while this transaction holds the lock
        assert thread.is_alive() and order == []
        order.append("first")
    thread.join(10)
    assert order == ["first", "second"]
    assert not lock.locked()


def test_a_writer_that_waits_past_its_timeout_is_told_the_database_is_locked(lock, settings):
    from django.db.utils import OperationalError

    failure: list[BaseException] = []

    def second() -> None:
        db = connections.create_connection("default")
        db.settings_dict["OPTIONS"] = {**db.settings_dict["OPTIONS"], "timeout": 0.2}
        try:
            db.set_autocommit(False, force_begin_transaction_with_broken_autocommit=True)
        except OperationalError as exc:
            failure.append(exc)
        finally:
            db.close()

    with transaction.atomic():
        Agent.objects.filter(slug="none").update(max_artifacts=1)
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(10)
    assert failure and "locked" in str(failure[0])
    assert not lock.locked()
